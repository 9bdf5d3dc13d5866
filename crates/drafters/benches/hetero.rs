//! What pruning the drafter's LM head saves per drafted token.
//!
//! A Llama-shaped drafter whose head dominates its cost, as in small drafters with large
//! vocabularies (hidden 256, 2 layers, 32 000 tokens, random weights written to a temporary
//! checkpoint), scores the next token of a 64-token context with:
//! - the full head (union; TLI computed on the host from the full row),
//! - the head pruned to a TLI intersection of 9 651 rows (Llama-2's tokens shared with
//!   Llama-3.1, string matching),
//! - the head pruned to a 2 048-token FR shortlist.
//!
//! Each iteration runs one position (the rest is in the KV cache) and reads the logits back.

use std::io::Write;
use std::path::Path;

use anyspec_drafters::hetero::{BurnDrafterModel, DrafterModel};
use anyspec_models::{Checkpoint, DeviceChoice};
use criterion::{Criterion, criterion_group, criterion_main};

const HIDDEN: usize = 256;
const INTERMEDIATE: usize = 512;
const LAYERS: usize = 2;
const VOCAB: usize = 32_000;

struct Xorshift(u64);

impl Xorshift {
    fn normalish(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 11) as f64 / (1u64 << 53) as f64 - 0.5) as f32
    }
}

/// Writes config.json and model.safetensors (f32) for a random Llama into `dir`.
fn write_checkpoint(dir: &Path) {
    let config = format!(
        r#"{{"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":{HIDDEN},
        "intermediate_size":{INTERMEDIATE},"num_hidden_layers":{LAYERS},"num_attention_heads":4,
        "num_key_value_heads":4,"vocab_size":{VOCAB},"rms_norm_eps":1e-5,"rope_theta":10000.0,
        "max_position_embeddings":512,"tie_word_embeddings":false,"hidden_act":"silu",
        "bos_token_id":1,"eos_token_id":2}}"#
    );
    std::fs::write(dir.join("config.json"), config).unwrap();
    let mut tensors: Vec<(String, Vec<usize>)> = vec![
        ("model.embed_tokens.weight".into(), vec![VOCAB, HIDDEN]),
        ("lm_head.weight".into(), vec![VOCAB, HIDDEN]),
        ("model.norm.weight".into(), vec![HIDDEN]),
    ];
    for i in 0..LAYERS {
        let p = format!("model.layers.{i}");
        for (name, shape) in [
            ("input_layernorm.weight", vec![HIDDEN]),
            ("post_attention_layernorm.weight", vec![HIDDEN]),
            ("self_attn.q_proj.weight", vec![HIDDEN, HIDDEN]),
            ("self_attn.k_proj.weight", vec![HIDDEN, HIDDEN]),
            ("self_attn.v_proj.weight", vec![HIDDEN, HIDDEN]),
            ("self_attn.o_proj.weight", vec![HIDDEN, HIDDEN]),
            ("mlp.gate_proj.weight", vec![INTERMEDIATE, HIDDEN]),
            ("mlp.up_proj.weight", vec![INTERMEDIATE, HIDDEN]),
            ("mlp.down_proj.weight", vec![HIDDEN, INTERMEDIATE]),
        ] {
            tensors.push((format!("{p}.{name}"), shape));
        }
    }
    let mut header = Vec::new();
    let mut offset = 0usize;
    for (name, shape) in &tensors {
        let bytes = shape.iter().product::<usize>() * 4;
        let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
        header.push(format!(
            r#""{name}":{{"dtype":"F32","shape":[{}],"data_offsets":[{offset},{}]}}"#,
            dims.join(","),
            offset + bytes
        ));
        offset += bytes;
    }
    let mut header = format!("{{{}}}", header.join(","));
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut file = std::io::BufWriter::new(std::fs::File::create(dir.join("model.safetensors")).unwrap());
    file.write_all(&(header.len() as u64).to_le_bytes()).unwrap();
    file.write_all(header.as_bytes()).unwrap();
    let mut rng = Xorshift(0x9e37_79b9_7f4a_7c15);
    for (name, shape) in &tensors {
        let norm = name.contains("norm");
        for _ in 0..shape.iter().product::<usize>() {
            let v = if norm { 1.0 } else { rng.normalish() * 0.2 };
            file.write_all(&v.to_le_bytes()).unwrap();
        }
    }
    file.flush().unwrap();
}

fn benches(c: &mut Criterion) {
    let dir = std::env::temp_dir().join(format!("anyspec-hetero-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    write_checkpoint(&dir);
    let model = Checkpoint::open(&dir).unwrap().load_model(&DeviceChoice::Cpu.device().unwrap()).unwrap();
    let context: Vec<u32> = (0..64u32).map(|i| (i * 7919) % VOCAB as u32).collect();
    // Three ids in ten stand in for the intersection, the 2 048 lowest ids for the shortlist.
    let intersection: Vec<u32> = (0..VOCAB as u32).filter(|d| d % 10 < 3).take(9_651).collect();
    let shortlist: Vec<u32> = (0..2_048).collect();

    let mut group = c.benchmark_group("drafter_next_token");
    for (name, rows) in
        [("full_head_32000", None), ("tli_pruned_9651", Some(&intersection)), ("fr_shortlist_2048", Some(&shortlist))]
    {
        let mut drafter = BurnDrafterModel::new(model.clone());
        drafter.keep_rows(rows.map(Vec::as_slice)).unwrap();
        drafter.next_logits(&context).unwrap();
        group.bench_function(name, |b| b.iter(|| std::hint::black_box(drafter.next_logits(&context).unwrap())));
    }
    group.finish();
    std::fs::remove_dir_all(&dir).ok();
}

criterion_group!(hetero, benches);
criterion_main!(hetero);
