//! Prints a GGUF file's metadata (arrays abbreviated), its first tensor infos and, when the
//! metadata has one, a summary of its tokenizer:
//! `cargo run -p anyspec-gguf --example dump_metadata -- FILE.gguf`.
#![allow(clippy::print_stdout)]

use anyspec_gguf::{GgufFile, MetadataValue};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: dump_metadata FILE.gguf")?;
    let file = GgufFile::open(&path)?;
    println!("version {} alignment {} data at {}", file.version(), file.alignment(), file.data_offset());
    for (key, value) in file.metadata() {
        match value {
            MetadataValue::Array(items) => {
                println!("{key}: {} x{} first {:?}", value.type_name(), items.len(), &items[..items.len().min(8)])
            }
            MetadataValue::String(s) if s.len() > 200 => println!("{key}: string {:?}…", &s[..200]),
            other => println!("{key}: {other:?}"),
        }
    }
    for t in file.tensors().iter().take(12) {
        println!("{} {:?} {} @{}", t.name, t.dims, t.ggml_type, t.offset);
    }
    if file.get("tokenizer.ggml.model").is_some() {
        let tok = anyspec_gguf::tokenizer::tokenizer_from_gguf(&file)?;
        println!(
            "tokenizer: {} tokens, bos {:?}, eos {:?}, add_bos {}",
            tok.tokenizer.get_vocab_size(true),
            tok.bos,
            tok.eos,
            tok.add_bos
        );
    }
    Ok(())
}
