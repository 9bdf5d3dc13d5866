use anyspec_core::NoProgress;
use anyspec_train::{TrainConfig, TrainableLlama, byte_tokenizer, encode_stream, train};
use burn::tensor::Device;

use crate::{fixture_texts, tiny_spec};

#[test]
fn a_few_steps_reduce_the_validation_loss() {
    let tokenizer = byte_tokenizer().unwrap();
    let texts = fixture_texts();
    let stream = encode_stream(&tokenizer, &texts, 0).unwrap();
    let (train_part, valid_part) = stream.split_at(stream.len() * 9 / 10);
    let mut model = TrainableLlama::new(tiny_spec(257), 1, &Device::flex()).unwrap();
    let config = TrainConfig {
        steps: 30,
        batch_size: 4,
        seq_len: 32,
        learning_rate: 1e-2,
        warmup_steps: 3,
        eval_every: 30,
        eval_windows: 8,
        ..TrainConfig::default()
    };
    let mut logged = 0;
    let report = train(&mut model, train_part, valid_part, &config, &NoProgress, &mut |_| logged += 1).unwrap();
    assert_eq!(logged, 30);
    // A fresh model predicts ~uniformly over 257 bytes: ln 257 ≈ 5.55 nats.
    let first = report.steps[0].loss;
    assert!((first - 257f32.ln()).abs() < 0.3, "initial loss {first}");
    let valid = report.final_valid_loss().unwrap();
    assert!(valid < first - 1.5, "validation loss {valid} after 30 steps vs {first} at the start");
}

#[test]
fn streams_shorter_than_a_window_are_refused() {
    let mut model = TrainableLlama::new(tiny_spec(257), 1, &Device::flex()).unwrap();
    let config = TrainConfig { seq_len: 16, ..TrainConfig::default() };
    let err = train(&mut model, &[1, 2, 3], &[1; 40], &config, &NoProgress, &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("3 tokens"), "{err}");
}

#[test]
fn token_ids_beyond_the_vocabulary_are_errors() {
    let model = TrainableLlama::new(tiny_spec(257), 1, &Device::flex()).unwrap();
    let err = model.sequence_logits(&[1, 300]).unwrap_err().to_string();
    assert!(err.contains("300"), "{err}");
}
