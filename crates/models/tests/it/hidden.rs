//! The final hidden state beside the logits, the LM head's rows and the input embeddings:
//! what DynaSpec's router and clustering read from a model.

use crate::common::{every_engine, max_abs_diff, reference};

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[test]
fn hidden_times_the_head_rows_gives_the_logits_on_every_engine() {
    for (name, model) in every_engine() {
        let ids = reference(&name).input_ids;
        let n = ids.len();
        let plain = model.forward_on_host(&ids, &mut model.new_cache(), n, None).unwrap();
        let rows = model.forward_with_hidden(&ids, &mut model.new_cache(), n, None).unwrap();
        let (hidden, logits) = (rows.hidden, rows.logits);
        assert_eq!(max_abs_diff(&logits, &plain), 0.0, "{name}: logits differ from forward_on_host");
        let c = model.config();
        assert_eq!(hidden.len(), n);
        assert!(hidden.iter().all(|h| h.len() == c.hidden_size), "{name}: hidden width");
        let head = model.lm_head_rows().unwrap();
        assert_eq!(head.len(), c.vocab_size * c.hidden_size);
        // The logits recomputed from the hidden state and the head's rows, on the host.
        let recomputed: Vec<Vec<f32>> =
            hidden.iter().map(|h| head.chunks_exact(c.hidden_size).map(|row| dot(h, row)).collect()).collect();
        let scale = plain.iter().flatten().fold(1.0f32, |m, v| m.max(v.abs()));
        let diff = max_abs_diff(&recomputed, &plain);
        // Native Q8 activations round the hidden state; burn and the exact kernels agree to f32.
        assert!(diff <= 0.05 * scale, "{name}: hidden · headᵀ is {diff} from the logits (scale {scale})");
        // The negative control: another position's hidden state does not give these logits.
        let shifted: Vec<Vec<f32>> = recomputed.iter().cycle().skip(1).take(n).cloned().collect();
        assert!(max_abs_diff(&shifted, &plain) > 0.05 * scale, "{name}: every position has the same logits");

        // With a pruned head, the logits are the kept columns and the hidden state is unchanged.
        let kept = [3u32, 0, 7];
        let pruned = model.pruned_head(&kept).unwrap();
        let rows2 = model.forward_with_hidden(&ids, &mut model.new_cache(), 2, Some(&pruned)).unwrap();
        let (hidden2, logits2) = (rows2.hidden, rows2.logits);
        assert_eq!(max_abs_diff(&hidden2, &hidden[n - 2..]), 0.0, "{name}: hidden state with a pruned head");
        let columns: Vec<Vec<f32>> =
            plain[n - 2..].iter().map(|row| kept.iter().map(|&k| row[k as usize]).collect()).collect();
        assert!(max_abs_diff(&logits2, &columns) <= 1e-4 * scale, "{name}: pruned logits");
    }
}

#[test]
fn embeddings_agree_across_engines_and_bad_tokens_are_refused() {
    let models = every_engine();
    for pair in models.chunks(2) {
        let [(name, native), (_, burn)] = pair else { panic!("every_engine pairs native and burn") };
        let vocab = native.config().vocab_size as u32;
        for token in [0, 1, vocab - 1] {
            let (a, b) = (native.embedding(token).unwrap(), burn.embedding(token).unwrap());
            assert_eq!(a.len(), native.config().hidden_size);
            assert!(
                max_abs_diff(std::slice::from_ref(&a), &[b]) < 1e-2,
                "{name}: embedding of {token} differs across engines"
            );
            assert!(a.iter().any(|&v| v != 0.0), "{name}: embedding of {token} is all zeros");
        }
        assert_ne!(native.embedding(0).unwrap(), native.embedding(1).unwrap(), "{name}: two tokens embed alike");
        for model in [native, burn] {
            let message = model.embedding(vocab).unwrap_err().to_string();
            assert!(message.contains(&vocab.to_string()), "{name}: {message}");
        }
    }
}
