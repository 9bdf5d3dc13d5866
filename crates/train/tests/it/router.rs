//! The DynaSpec router trainer learns a rule the labels follow, and refuses bad data.

use anyspec_core::NoProgress;
use anyspec_train::{RouterData, RouterTrainConfig, train_router};
use burn::tensor::Device;

/// Position `i` has a one-hot feature `i % 4` (plus a constant) and its positive clusters are
/// `{i % 4, (i % 4 + 1) % 4}` of 6 clusters (4 and 5 never positive).
fn rule(n: usize) -> RouterData {
    let mut inputs = Vec::new();
    let mut positives = Vec::new();
    for i in 0..n {
        let c = i % 4;
        let mut row = vec![0.0f32; 5];
        row[c] = 1.0;
        row[4] = 1.0;
        inputs.extend_from_slice(&row);
        positives.push(vec![c as u32, ((c + 1) % 4) as u32]);
    }
    RouterData { inputs, input_size: 5, positives, clusters: 6 }
}

fn scores(w: &anyspec_train::RouterWeights, x: &[f32], hidden: usize) -> Vec<f32> {
    let h: Vec<f32> = (0..hidden)
        .map(|j| (w.b1[j] + (0..x.len()).map(|k| w.w1[j * x.len() + k] * x[k]).sum::<f32>()).max(0.0))
        .collect();
    (0..w.b2.len()).map(|m| w.b2[m] + (0..hidden).map(|j| w.w2[m * hidden + j] * h[j]).sum::<f32>()).collect()
}

#[test]
fn the_router_learns_which_clusters_follow_which_input() {
    let data = rule(256);
    let config =
        RouterTrainConfig { hidden: 16, epochs: 30, batch_size: 32, learning_rate: 1e-2, ..Default::default() };
    let w = train_router(&data, Some(&rule(16)), &config, &Device::flex(), &NoProgress).unwrap();
    assert_eq!((w.w1.len(), w.b1.len(), w.w2.len(), w.b2.len()), (16 * 5, 16, 6 * 16, 6));
    assert_eq!(w.loss_log.len(), 30);
    assert_eq!(w.valid_log.len(), 30);
    assert!(w.loss_log[29] < 0.3 * w.loss_log[0], "loss {:?}", w.loss_log);
    // The two labelled clusters of each input outrank the other four.
    for c in 0..4 {
        let mut x = vec![0.0f32; 5];
        x[c] = 1.0;
        x[4] = 1.0;
        let s = scores(&w, &x, 16);
        let mut order: Vec<usize> = (0..6).collect();
        order.sort_by(|a, b| s[*b].total_cmp(&s[*a]));
        let mut top: Vec<usize> = order[..2].to_vec();
        top.sort_unstable();
        let mut want = vec![c, (c + 1) % 4];
        want.sort_unstable();
        assert_eq!(top, want, "input {c}: scores {s:?}");
    }
}

#[test]
fn inconsistent_data_and_settings_are_refused() {
    let mut data = rule(8);
    let config = RouterTrainConfig { hidden: 4, epochs: 1, batch_size: 4, ..Default::default() };
    data.positives[0].push(6);
    let e = train_router(&data, None, &config, &Device::flex(), &NoProgress).unwrap_err().to_string();
    assert!(e.contains("positive cluster"), "{e}");
    let mut short = rule(8);
    short.inputs.pop();
    assert!(train_router(&short, None, &config, &Device::flex(), &NoProgress).is_err());
    let zero = RouterTrainConfig { epochs: 0, ..config.clone() };
    assert!(train_router(&rule(8), None, &zero, &Device::flex(), &NoProgress).is_err());
    let other = RouterData { clusters: 7, ..rule(4) };
    assert!(train_router(&rule(8), Some(&other), &config, &Device::flex(), &NoProgress).is_err());
}
