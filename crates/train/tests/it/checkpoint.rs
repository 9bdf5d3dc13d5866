use anyspec_core::NoProgress;
use anyspec_models::{Checkpoint, DeviceChoice};
use anyspec_train::{
    StoredDtype, TrainConfig, TrainableLlama, encode_stream, save_checkpoint, train, train_byte_level_bpe,
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
