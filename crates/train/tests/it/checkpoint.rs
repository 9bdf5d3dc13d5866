use anyspec_core::NoProgress;
use anyspec_models::{Checkpoint, DeviceChoice, Engine, LoadOptions};
use anyspec_train::{
    StoredDtype, TrainConfig, TrainableLlama, byte_tokenizer, encode_stream, save_checkpoint, train,
    train_byte_level_bpe,
};

use crate::{fixture_texts, tiny_spec};

/// Trains a few steps (so the norm gains are no longer all ones), saves, reloads with
/// anyspec-models and compares the logits of every position.
#[test]
fn a_saved_checkpoint_reloads_to_the_same_logits() {
    let texts = fixture_texts();
    let tokenizer = train_byte_level_bpe(&texts, 400).unwrap();
    let stream = encode_stream(&tokenizer, &texts, 0).unwrap();
    let device = DeviceChoice::Cpu.device().unwrap();
    let mut model = TrainableLlama::new(tiny_spec(400), 7, &device).unwrap();
    let config =
        TrainConfig { steps: 5, batch_size: 2, seq_len: 16, eval_every: 5, eval_windows: 2, ..TrainConfig::default() };
    train(&mut model, &stream, &stream, &config, &NoProgress, &mut |_| {}).unwrap();

    let dir = std::env::temp_dir().join(format!("anyspec-train-ckpt-{}", std::process::id()));
    save_checkpoint(&model, &tokenizer, &dir, StoredDtype::F32, &[("corpus", "fixture".into())]).unwrap();
    let checkpoint = Checkpoint::open(&dir).unwrap();
    assert_eq!(checkpoint.config().vocab_size, 400);
    assert_eq!(checkpoint.config().num_kv_heads, 2);
    assert!(checkpoint.config().tie_word_embeddings);
    let reloaded = checkpoint.load_model(&device).unwrap();
    let loaded_tokenizer = checkpoint.tokenizer().unwrap();

    let prompt = "It is a truth universally acknowledged";
    let tokens = loaded_tokenizer.encode(prompt).unwrap();
    assert_eq!(tokens, tokenizer.encode(prompt, false).unwrap().get_ids());
    let expected = model.sequence_logits(&tokens).unwrap();
    let mut cache = reloaded.new_cache();
    let logits = reloaded.forward(&tokens, &mut cache, tokens.len()).unwrap();
    let got: Vec<f32> = logits.into_data().convert::<f32>().try_into_vec().unwrap();
    let mut worst = 0f32;
    for (row, want) in got.chunks_exact(400).zip(&expected) {
        for (a, b) in row.iter().zip(want) {
            worst = worst.max((a - b).abs());
        }
    }
    assert!(worst < 1e-4, "largest logit difference {worst}");

    // f16 storage is close but not identical.
    save_checkpoint(&model, &tokenizer, &dir, StoredDtype::F16, &[]).unwrap();
    let half = Checkpoint::open(&dir).unwrap().load_model(&device).unwrap();
    let mut cache = half.new_cache();
    let logits = half.forward(&tokens, &mut cache, 1).unwrap();
    let got: Vec<f32> = logits.into_data().convert::<f32>().try_into_vec().unwrap();
    let last = expected.last().unwrap();
    let diff = got.iter().zip(last).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    assert!(diff < 1e-2, "f16 logits differ by {diff}");
    std::fs::remove_dir_all(&dir).ok();
}

/// The training model and both of anyspec-models' engines give the same logits on the same
/// weights, at every position of a 12-token sequence (RoPE far from the identity) with
/// grouped-query attention. The burn engine runs the same `anyspec_models::blocks` in another
/// layout (one sequence, a KV cache, query heads stacked instead of `repeat_kv`); the native
/// engine has its own host-slice arithmetic, so a fault in the shared blocks (a flipped
/// rotation sign, say) fails here too.
#[test]
fn the_training_model_and_both_inference_engines_give_the_same_logits() {
    let tokenizer = byte_tokenizer().unwrap();
    let vocab = tokenizer.get_vocab_size(true);
    let spec = tiny_spec(vocab);
    assert!(spec.num_kv_heads < spec.num_heads, "the test needs grouped-query attention");
    let device = DeviceChoice::Cpu.device().unwrap();
    let model = TrainableLlama::new(spec, 11, &device).unwrap();
    let dir = std::env::temp_dir().join(format!("anyspec-train-same-logits-{}", std::process::id()));
    save_checkpoint(&model, &tokenizer, &dir, StoredDtype::F32, &[]).unwrap();
    let checkpoint = Checkpoint::open(&dir).unwrap();

    let tokens: Vec<u32> = (0..12).map(|i| (i * 37 + 5) % vocab as u32).collect();
    let expected = model.sequence_logits(&tokens).unwrap();
    assert_eq!(expected.len(), tokens.len());
    for engine in [Engine::Native, Engine::Burn] {
        let reloaded = checkpoint.load_model_with(&device, &LoadOptions::engine(engine)).unwrap();
        let mut cache = reloaded.new_cache();
        let logits = reloaded.forward(&tokens, &mut cache, tokens.len()).unwrap();
        let got: Vec<f32> = logits.into_data().convert::<f32>().try_into_vec().unwrap();
        assert_eq!(got.len(), tokens.len() * vocab);
        let worst = got
            .chunks_exact(vocab)
            .zip(&expected)
            .flat_map(|(row, want)| row.iter().zip(want).map(|(a, b)| (a - b).abs()))
            .fold(0f32, f32::max);
        assert!(worst < 1e-4, "{engine:?} engine: largest logit difference {worst}");
    }
    std::fs::remove_dir_all(&dir).ok();
}
