//! GGUF checkpoints: a fixture written as llama.cpp's converter would write it (query and key
//! rows permuted for ggml's RoPE) loads into the same model as its safetensors original, on both
//! engines, in f32 and quantized; broken files are refused with errors that name the problem.

use std::path::{Path, PathBuf};

use anyspec_cpu_kernels::WeightFormat;
use anyspec_gguf::{GgmlType, GgufWriter, MetadataValue};
use anyspec_models::{Checkpoint, DeviceChoice, Engine, Error, Kernel, Llama, LoadOptions};
use safetensors::SafeTensors;

use crate::common::{fixture_dir, max_abs_diff, reference};

/// A fresh path in the system's temporary directory, removed when dropped.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str) -> Self {
        let unique = format!("anyspec-models-{}-{name}", std::process::id());
        TempFile(std::env::temp_dir().join(unique))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// How to write the fixture.
#[derive(Clone, Copy)]
struct Options {
    /// Storage of every matrix (vectors stay f32).
    matrices: GgmlType,
    /// Whether to apply the converter's query/key permutation (a correct file does).
    permute: bool,
    architecture: &'static str,
    /// Store the RoPE base as a string (a malformed file).
    rope_base_as_text: bool,
    /// `block_count` in the metadata (the file always holds 2 layers).
    block_count: u32,
    /// `rope.dimension_count` in the metadata, when set.
    rope_dimension_count: Option<u64>,
}

const F32_PERMUTED: Options = Options {
    matrices: GgmlType::F32,
    permute: true,
    architecture: "llama",
    rope_base_as_text: false,
    block_count: 2,
    rope_dimension_count: None,
};

/// convert_hf_to_gguf.py's `permute`: within each head, row `s·d/2 + j` goes to `2j + s`.
fn permute_rows(values: &[f32], rows: usize, cols: usize, heads: usize) -> Vec<f32> {
    let head_dim = rows / heads;
    let half = head_dim / 2;
    let mut out = vec![0.0; values.len()];
    for h in 0..heads {
        for s in 0..2 {
            for j in 0..half {
                let from = h * head_dim + s * half + j;
                let to = h * head_dim + 2 * j + s;
                out[to * cols..(to + 1) * cols].copy_from_slice(&values[from * cols..(from + 1) * cols]);
            }
        }
    }
    out
}

fn ggml_format(t: GgmlType) -> WeightFormat {
    match t {
        GgmlType::F32 => WeightFormat::F32,
        GgmlType::Q8_0 => WeightFormat::Q8_0,
        GgmlType::Q4_0 => WeightFormat::Q4_0,
        GgmlType::Q4_1 => WeightFormat::Q4_1,
        other => panic!("the test writes no {other:?}"),
    }
}

fn encode(values: &[f32], t: GgmlType) -> Vec<u8> {
    match t {
        GgmlType::F32 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        other => anyspec_cpu_kernels::quantize(ggml_format(other), values).unwrap(),
    }
}

/// Writes the llama3-gqa fixture (plain RoPE: GGUF files carry Llama 3 scaling differently) as
/// a GGUF file.
fn write_fixture(path: &Path, options: Options) {
    let dir = fixture_dir("llama3-gqa");
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let tensors = SafeTensors::deserialize(&bytes).unwrap();
    let f32s = |name: &str| -> (Vec<f32>, Vec<usize>) {
        let view = tensors.tensor(name).unwrap();
        let values = view.data().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
        (values, view.shape().to_vec())
    };
    let arch = options.architecture;
    let mut writer = GgufWriter::new();
    let u32v = |v: u32| MetadataValue::U32(v);
    writer
        .metadata("general.architecture", MetadataValue::String(arch.into()))
        .metadata(&format!("{arch}.block_count"), u32v(options.block_count))
        .metadata(&format!("{arch}.context_length"), u32v(128))
        .metadata(&format!("{arch}.embedding_length"), u32v(64))
        .metadata(&format!("{arch}.feed_forward_length"), u32v(128))
        .metadata(&format!("{arch}.attention.head_count"), u32v(4))
        .metadata(&format!("{arch}.attention.head_count_kv"), u32v(2))
        .metadata(&format!("{arch}.attention.key_length"), u32v(16))
        .metadata(
            &format!("{arch}.rope.freq_base"),
            if options.rope_base_as_text {
                MetadataValue::String("500000".into())
            } else {
                MetadataValue::F32(500_000.0)
            },
        )
        .metadata(&format!("{arch}.attention.layer_norm_rms_epsilon"), MetadataValue::F32(1e-5));
    if let Some(dims) = options.rope_dimension_count {
        writer.metadata(&format!("{arch}.rope.dimension_count"), MetadataValue::U64(dims));
    }
    let mut put = |gguf: &str, hf: &str, heads: Option<usize>| {
        let (mut values, shape) = f32s(hf);
        let t = if shape.len() == 2 { options.matrices } else { GgmlType::F32 };
        if let (Some(heads), true) = (heads, options.permute) {
            values = permute_rows(&values, shape[0], shape[1], heads);
        }
        let dims: Vec<u64> = shape.iter().rev().map(|&d| d as u64).collect();
        writer.tensor(gguf, &dims, t, encode(&values, t)).unwrap();
    };
    put("token_embd.weight", "model.embed_tokens.weight", None);
    put("output.weight", "lm_head.weight", None);
    put("output_norm.weight", "model.norm.weight", None);
    for i in 0..2 {
        let hf = |s: &str| format!("model.layers.{i}.{s}");
        let gg = |s: &str| format!("blk.{i}.{s}");
        put(&gg("attn_norm.weight"), &hf("input_layernorm.weight"), None);
        put(&gg("ffn_norm.weight"), &hf("post_attention_layernorm.weight"), None);
        put(&gg("attn_q.weight"), &hf("self_attn.q_proj.weight"), Some(4));
        put(&gg("attn_k.weight"), &hf("self_attn.k_proj.weight"), Some(2));
        put(&gg("attn_v.weight"), &hf("self_attn.v_proj.weight"), None);
        put(&gg("attn_output.weight"), &hf("self_attn.o_proj.weight"), None);
        put(&gg("ffn_gate.weight"), &hf("mlp.gate_proj.weight"), None);
        put(&gg("ffn_up.weight"), &hf("mlp.up_proj.weight"), None);
        put(&gg("ffn_down.weight"), &hf("mlp.down_proj.weight"), None);
    }
    writer.write(path).unwrap();
}

/// The safetensors original with plain RoPE (on the native engine, which `Llama::load` picks on
/// the CPU).
fn original() -> Llama {
    let dir = fixture_dir("llama3-gqa");
    let mut config = Checkpoint::open(&dir).unwrap().config().clone();
    config.rope_scaling = anyspec_models::RopeScaling::None;
    let device = DeviceChoice::Cpu.device().unwrap();
    let model = Llama::load(&dir, config, &device).unwrap();
    assert_eq!(model.engine(), Engine::Native);
    model
}

fn all_logits(model: &Llama) -> Vec<Vec<f32>> {
    let ids = reference("llama3-gqa").input_ids;
    let mut cache = model.new_cache();
    model.forward_on_host(&ids, &mut cache, ids.len(), None).unwrap()
}

fn load_gguf(path: &Path, engine: Engine) -> Llama {
    load_gguf_with(path, LoadOptions::engine(engine))
}

fn load_gguf_with(path: &Path, options: LoadOptions) -> Llama {
    let device = DeviceChoice::Cpu.device().unwrap();
    Checkpoint::open(path).unwrap().load_model_with(&device, &options).unwrap()
}

#[test]
fn an_f32_gguf_is_the_safetensors_model_on_both_engines() {
    let file = TempFile::new("f32.gguf");
    write_fixture(&file.0, F32_PERMUTED);
    let expected = all_logits(&original());
    for engine in [Engine::Native, Engine::Burn] {
        let model = load_gguf(&file.0, engine);
        assert_eq!(model.engine(), engine);
        let diff = max_abs_diff(&all_logits(&model), &expected);
        assert!(diff <= 1e-4, "{engine}: max |Δ| = {diff}");
    }
}

#[test]
fn without_the_permutation_the_model_is_another_one() {
    // The negative control of the test above: a file whose query/key rows were not permuted by
    // a converter is read with the permutation undone anyway, which must change the logits.
    let file = TempFile::new("unpermuted.gguf");
    write_fixture(&file.0, Options { permute: false, ..F32_PERMUTED });
    let diff = max_abs_diff(&all_logits(&load_gguf(&file.0, Engine::Native)), &all_logits(&original()));
    assert!(diff > 1e-3, "max |Δ| = {diff}: the permutation made no difference");
}

#[test]
fn quantized_weights_give_the_dequantized_model_on_both_engines() {
    for quant in [GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1] {
        let file = TempFile::new(&format!("{quant:?}.gguf"));
        write_fixture(&file.0, Options { matrices: quant, ..F32_PERMUTED });
        // The burn engine dequantizes at load: the same model in f32.
        let burn = all_logits(&load_gguf(&file.0, Engine::Burn));
        // The native engine with f32 activations (exact to the file's weights) on every kernel
        // that has such a path here.
        for kernel in [Kernel::Scalar, Kernel::Avx2].into_iter().filter(|k| k.is_supported()) {
            let options = LoadOptions::engine(Engine::Native).with_kernel(Some(kernel)).with_threads(Some(2));
            let native = all_logits(&load_gguf_with(&file.0, options));
            let diff = max_abs_diff(&native, &burn);
            assert!(diff <= 1e-4, "{quant:?} on {kernel:?}: native vs dequantized burn max |Δ| = {diff}");
        }
        // Converted to f32 at load, the file is the same model (packed f32 products).
        let as_f32 = LoadOptions::engine(Engine::Native).with_storage(Some(WeightFormat::F32));
        let diff = max_abs_diff(&all_logits(&load_gguf_with(&file.0, as_f32)), &burn);
        assert!(diff <= 1e-4, "{quant:?} stored as f32: max |Δ| = {diff}");
        // And quantization did happen: the logits moved away from the f32 model.
        let f32_diff = max_abs_diff(&burn, &all_logits(&original()));
        assert!(f32_diff > 1e-6, "{quant:?}: no quantization error at all");
    }
}

#[test]
fn half_precision_in_panels_is_the_half_precision_model_and_scores_drafts_bit_for_bit() {
    // f16/bf16 weights stay at two bytes, in panels of sixteen rows, where the kernel reads
    // them (AVX-512); elsewhere they are widened to f32 rows. Either way the same model.
    let file = TempFile::new("half.gguf");
    write_fixture(&file.0, F32_PERMUTED);
    for storage in [WeightFormat::F16, WeightFormat::BF16] {
        let default = LoadOptions::engine(Engine::Native).with_storage(Some(storage)).with_threads(Some(2));
        let model = load_gguf_with(&file.0, default);
        let rows = load_gguf_with(&file.0, default.with_kernel(Some(Kernel::Scalar)));
        let diff = max_abs_diff(&all_logits(&model), &all_logits(&rows));
        assert!(diff <= 1e-4, "{storage}: panels vs f32 rows of the same weights, max |Δ| = {diff}");
        // The rounding to half precision did happen.
        let f32_diff = max_abs_diff(&all_logits(&model), &all_logits(&original()));
        assert!(f32_diff > 1e-6, "{storage}: no rounding at all");
        // A draft's positions scored in one pass give each position's logits bit for bit as
        // scored one at a time (what greedy verification relies on).
        let ids = reference("llama3-gqa").input_ids;
        let mut cache = model.new_cache();
        let together = model.forward_on_host(&ids, &mut cache, ids.len(), None).unwrap();
        let mut cache = model.new_cache();
        for (i, token) in ids.iter().enumerate() {
            let alone = model.forward_on_host(&[*token], &mut cache, 1, None).unwrap();
            for (a, b) in alone[0].iter().zip(&together[i]) {
                assert_eq!(a.to_bits(), b.to_bits(), "{storage}: position {i} alone {a} vs in one pass {b}");
            }
        }
    }
}

#[test]
fn eight_bit_activations_stay_close_to_the_exact_products() {
    // llama.cpp's design (Kernel::Avx2Q8) quantizes activations per 32-block: not exact, but
    // its top choices must be the exact path's.
    if !Kernel::Avx2Q8.is_supported() {
        eprintln!("SKIPPED: this CPU has no AVX2");
        return;
    }
    let file = TempFile::new("q8-activations.gguf");
    write_fixture(&file.0, Options { matrices: GgmlType::Q8_0, ..F32_PERMUTED });
    let exact = all_logits(&load_gguf(&file.0, Engine::Burn));
    let options = LoadOptions::engine(Engine::Native).with_kernel(Some(Kernel::Avx2Q8));
    let approximate = all_logits(&load_gguf_with(&file.0, options));
    let argmax = |row: &Vec<f32>| row.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).unwrap().0;
    let agree = exact.iter().zip(&approximate).filter(|(a, b)| argmax(a) == argmax(b)).count();
    assert!(agree * 10 >= exact.len() * 9, "greedy choices agree at {agree} of {} positions", exact.len());
    let diff = max_abs_diff(&exact, &approximate);
    assert!(diff > 0.0, "8-bit activations changed nothing: is the kernel really selected?");
    // The AVX-512 VNNI kernel computes the same thing with other instructions: the same logits,
    // bit for bit, so a model decodes the same tokens on a CPU with AVX-512 as on one without.
    if Kernel::Avx512Q8.is_supported() {
        let options = LoadOptions::engine(Engine::Native).with_kernel(Some(Kernel::Avx512Q8)).with_threads(Some(2));
        let vnni = all_logits(&load_gguf_with(&file.0, options));
        for (a, b) in approximate.iter().flatten().zip(vnni.iter().flatten()) {
            assert_eq!(a.to_bits(), b.to_bits(), "Avx512Q8 vs Avx2Q8 logits: {a} vs {b}");
        }
    } else {
        eprintln!("SKIPPED (Avx512Q8 part): this CPU has no AVX-512 VNNI");
    }
}

#[test]
fn a_rope_dimension_count_whose_product_overflows_is_a_value_not_a_panic() {
    // rope.dimension_count × head_count past u64 (fuzzing noted it: it panicked in debug builds).
    // The file has attention.key_length, so the count is only checked, not refused.
    let file = TempFile::new("rope-dims.gguf");
    write_fixture(&file.0, Options { rope_dimension_count: Some(u64::MAX / 2), ..F32_PERMUTED });
    assert!(Checkpoint::open(&file.0).is_ok());
    // A count that matches the head width (16 × 4 heads = 64) opens as before.
    let file = TempFile::new("rope-dims-16.gguf");
    write_fixture(&file.0, Options { rope_dimension_count: Some(16), ..F32_PERMUTED });
    assert!(Checkpoint::open(&file.0).is_ok());
}

#[test]
fn a_qwen2_gguf_is_not_permuted() {
    // qwen2 files use the neox rotation (Hugging Face's): rows are stored as they are.
    let file = TempFile::new("qwen2.gguf");
    write_fixture(&file.0, Options { permute: false, architecture: "qwen2", ..F32_PERMUTED });
    let checkpoint = Checkpoint::open(&file.0).unwrap();
    assert!(checkpoint.config().qkv_bias, "qwen2 has q/k/v biases");
    // Our fixture has no biases, so loading must say which tensor is missing.
    let device = DeviceChoice::Cpu.device().unwrap();
    let err = checkpoint.load_model(&device).unwrap_err().to_string();
    assert!(err.contains("attn_q.bias"), "{err}");
}

#[test]
fn unsupported_architectures_types_and_truncation_are_named() {
    let file = TempFile::new("gpt2.gguf");
    write_fixture(&file.0, Options { architecture: "gpt2", ..F32_PERMUTED });
    let err = Checkpoint::open(&file.0).unwrap_err();
    assert!(matches!(err, Error::UnsupportedArchitecture { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains("\"gpt2\"") && text.contains("llama"), "{text}");

    // A file cut in the middle of its tensor data.
    let good = TempFile::new("cut.gguf");
    write_fixture(&good.0, F32_PERMUTED);
    let bytes = std::fs::read(&good.0).unwrap();
    std::fs::write(&good.0, &bytes[..bytes.len() - 1000]).unwrap();
    let err = Checkpoint::open(&good.0).map(|_| ()).unwrap_err().to_string();
    assert!(err.contains("cut.gguf"), "the error names the file: {err}");

    // A metadata value of the wrong type is refused by name, not replaced by the default.
    let typed = TempFile::new("text-rope.gguf");
    write_fixture(&typed.0, Options { rope_base_as_text: true, ..F32_PERMUTED });
    let err = Checkpoint::open(&typed.0).unwrap_err().to_string();
    assert!(err.contains("rope.freq_base"), "{err}");

    // Metadata claiming fewer layers than the file holds: the extra layers are named, not dropped.
    let short = TempFile::new("one-block.gguf");
    write_fixture(&short.0, Options { block_count: 1, ..F32_PERMUTED });
    let err = Checkpoint::open(&short.0).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::UnusedTensors { num_layers: 1, .. }), "{text}");
    assert!(text.contains("blk.1.attn_norm.weight") && text.contains("at least 2 layers"), "{text}");

    // A file that is not a model at all.
    let text_file = TempFile::new("notes.txt");
    std::fs::write(&text_file.0, "hello").unwrap();
    let err = Checkpoint::open(&text_file.0).unwrap_err();
    assert!(matches!(err, Error::NotAModel { .. }), "{err}");
    assert!(err.to_string().contains(".gguf"), "{err}");
}
