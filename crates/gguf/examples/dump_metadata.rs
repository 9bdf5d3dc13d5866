//! Prints a GGUF file's metadata (arrays abbreviated) and tensor infos: `cargo run -p anyspec-gguf --example dump_metadata -- FILE`.
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
    Ok(())
}
