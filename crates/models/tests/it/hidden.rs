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

#[test]
fn heads_pruned_to_whole_blocks_give_the_full_logits_at_their_ids() {
    // DynaSpec's shortlists are unions of clusters: on the native engine their logits come from a
    // copy of the head ordered cluster by cluster. They must be the full head's logits at those
    // ids, bit for bit (greedy drafting may not depend on the layout), in the documented order.
    for (name, model) in every_engine() {
        let ids = reference(&name).input_ids;
        let vocab = model.config().vocab_size as u32;
        // Blocks: the vocabulary in a scrambled order, cut into blocks of 1, 0, 5, 17 and the rest.
        let mut scrambled: Vec<u32> = (0..vocab).collect();
        scrambled.sort_by_key(|&v| (u64::from(v) * 2_654_435_761) % (1 << 32));
        let native = model.engine() == anyspec_models::Engine::Native;
        let cuts = [0usize, 1, 1, 6, 23, vocab as usize];
        let blocks: Vec<Vec<u32>> = cuts.windows(2).map(|w| scrambled[w[0]..w[1]].to_vec()).collect();
        let head_blocks = model.head_blocks(blocks.clone()).unwrap();
        assert_eq!(head_blocks.len(), 5);
        let plain = model.forward_on_host(&ids, &mut model.new_cache(), 2, None).unwrap();
        let scale = plain.iter().flatten().fold(1.0f32, |m, v| m.max(v.abs()));
        let eos = [blocks[3][2], blocks[4][0]]; // one inside a selected block, one not
        let head = model.pruned_head_blocks(&head_blocks, &[3, 0, 2], &eos).unwrap();
        let mut want: Vec<u32> = [&blocks[3], &blocks[0], &blocks[2]].into_iter().flatten().copied().collect();
        want.push(blocks[4][0]);
        assert_eq!(head.ids(), &want[..], "{name}: ids are the blocks in order, then the extra ones");
        let logits = model.forward_on_host(&ids, &mut model.new_cache(), 2, Some(&head)).unwrap();
        // The head alone on the hidden rows gives the same logits.
        let hidden = model.forward_with_hidden(&ids, &mut model.new_cache(), 2, None).unwrap().hidden.concat();
        let alone = model.logits_of_hidden(&hidden, Some(&head)).unwrap();
        assert_eq!(alone, logits.concat(), "{name}: the pruned head alone");
        let full = model.logits_of_hidden(&hidden, None).unwrap();
        assert_eq!(full, plain.concat(), "{name}: the full head alone");
        assert!(model.logits_of_hidden(&hidden[1..], None).is_err(), "{name}: a partial hidden row");
        for (row, full) in logits.iter().zip(&plain) {
            for (j, &id) in want.iter().enumerate() {
                let (got, expected) = (row[j], full[id as usize]);
                if native {
                    assert_eq!(got.to_bits(), expected.to_bits(), "{name}: logit of {id}");
                } else {
                    assert!((got - expected).abs() <= 1e-4 * scale, "{name}: logit of {id}: {got} vs {expected}");
                }
            }
        }
        // A model of the first layers shares the head, and so the ordered copy.
        if native {
            let drafter = model.first_layers(1).unwrap();
            let from_full = drafter.pruned_head_blocks(&head_blocks, &[4], &[]).unwrap();
            let own = drafter.pruned_head(&blocks[4]).unwrap();
            let a = drafter.forward_on_host(&ids, &mut drafter.new_cache(), 1, Some(&from_full)).unwrap();
            let b = drafter.forward_on_host(&ids, &mut drafter.new_cache(), 1, Some(&own)).unwrap();
            assert_eq!(a, b, "{name}: the first layers' logits through the full model's blocks");
        }
        let e = model.pruned_head_blocks(&head_blocks, &[5], &[]).unwrap_err().to_string();
        assert!(e.contains("head block 5 of 5"), "{name}: {e}");
        let e = model.pruned_head_blocks(&head_blocks, &[0], &[vocab]).unwrap_err().to_string();
        assert!(e.contains(&vocab.to_string()), "{name}: {e}");
        assert!(model.head_blocks(vec![vec![vocab]]).is_err(), "{name}: a block outside the vocabulary");
    }
}
