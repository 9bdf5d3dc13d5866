//! The intersection of two vocabularies, by string and by byte surface, and what it gives the
//! drafters: `cargo run -p anyspec-vocab-map --example intersect [TARGET.json DRAFTER.json]`.
//! Without arguments it pairs two of the test fixtures: a byte-level BPE and a SentencePiece
//! vocabulary, whose `Ġab` and `▁ab` are different strings but the same bytes, " ab".
#![allow(clippy::print_stdout)]

use std::path::PathBuf;

use anyspec_vocab_map::{MatchMode, VocabMap, Vocabulary};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut args = std::env::args_os().skip(1).map(PathBuf::from);
    let target_path = args.next().unwrap_or_else(|| data.join("tiny_bytelevel.json"));
    let drafter_path = args.next().unwrap_or_else(|| data.join("tiny_sentencepiece.json"));
    let target = Vocabulary::from_file(&target_path)?;
    let drafter = Vocabulary::from_file(&drafter_path)?;
    println!(
        "target  {}: {} tokens, fingerprint {}",
        target.name(),
        target.token_count(),
        target.fingerprint().short()
    );
    println!(
        "drafter {}: {} tokens, fingerprint {}",
        drafter.name(),
        drafter.token_count(),
        drafter.fingerprint().short()
    );

    for mode in [MatchMode::Raw, MatchMode::Bytes] {
        let map = VocabMap::build(&target, &drafter, mode);
        let shared = map.intersection();
        let of = |n: usize| 100.0 * shared as f64 / n.max(1) as f64;
        let (t, d) = (of(target.token_count()), of(drafter.token_count()));
        println!("{}: |T ∩ D| = {shared} ({t:.1}% of T, {d:.1}% of D)", mode.name());
    }

    // The byte-surface map is what the drafters use: drafter id → target id, as plain arrays.
    let map = VocabMap::build(&target, &drafter, MatchMode::Bytes);
    for (d, t) in (0..drafter.len() as u32).filter_map(|d| Some((d, map.target_of(d)?))).take(8) {
        let surface = String::from_utf8_lossy(drafter.surface(d).unwrap_or_default());
        println!("drafter {d:>3} → target {t:>3}  {surface:?}");
    }
    let _ids = map.id_map()?; // the input of anyspec_core::projection (TLI, union, RDK)
    Ok(())
}
