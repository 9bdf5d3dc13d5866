//! The pruned LM head computes exactly the kept columns of the full head.

use anyspec_drafters::hetero::{BurnDrafterModel, DrafterModel};

use crate::fixtures::{drafter_dir, load, prompt};

#[test]
fn pruned_logits_are_the_kept_columns_of_the_full_logits() {
    let model = load(&drafter_dir());
    let sequence: Vec<u32> = prompt().iter().map(|&t| t % 300).collect();
    let mut full = BurnDrafterModel::new(model.clone());
    let all = full.next_logits(&sequence).unwrap();
    assert_eq!(all.len(), 322);
    let kept = [5u32, 0, 321, 17, 256, 100];
    let mut pruned = BurnDrafterModel::new(model);
    pruned.keep_rows(Some(&kept)).unwrap();
    let some = pruned.next_logits(&sequence).unwrap();
    assert_eq!(some.len(), kept.len());
    for (&id, &logit) in kept.iter().zip(&some) {
        assert!((all[id as usize] - logit).abs() < 1e-4, "row {id}: {} vs {logit}", all[id as usize]);
    }
    // Lifting the restriction gives the full row again, and bad rows are refused.
    pruned.keep_rows(None).unwrap();
    assert_eq!(pruned.next_logits(&sequence).unwrap().len(), 322);
    assert!(pruned.keep_rows(Some(&[322])).is_err());
    assert!(pruned.keep_rows(Some(&[])).is_err());
}
