//! A target and a drafter with another tokenizer, through the public factory
//! `anyspec_drafters::hetero::build`: the tiny models the tests use (a 320-token byte-level BPE
//! target and a 322-token drafter with other ids and merges), so it runs on a fresh clone. Their
//! weights are random, so the text is noise; at temperature 0 it is the target's own greedy
//! text whichever algorithm drafts, which is what lossless means.
//!
//! `cargo run -p anyspec-drafters --example hetero_generate [tli|slem|slrs|rdk|union|auto]`
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::error::Error;
use std::ops::ControlFlow;
use std::path::PathBuf;

use anyspec_core::{Drafter, GenerationConfig, SamplingConfig, generate};
use anyspec_drafters::hetero::{self, AlgoRequest, Options, Pair};
use anyspec_models::{Checkpoint, DeviceChoice, LlamaTarget};
use anyspec_vocab_map::{MatchMode, VocabMap, Vocabulary};
use rand::SeedableRng;
use rand::rngs::StdRng;

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn Error>> {
    let request = match std::env::args().nth(1).as_deref() {
        None | Some("auto") => AlgoRequest::Auto,
        Some(name) => AlgoRequest::Fixed(name.parse()?),
    };
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let target = Checkpoint::open(root.join("../models/tests/data/mistral-window-f16"))?;
    let drafter = Checkpoint::open(root.join("tests/data/hetero-drafter"))?;
    let (target_tokenizer, drafter_tokenizer) = (target.tokenizer()?, drafter.tokenizer()?);
    let target_vocab = Vocabulary::from_tokenizer(target_tokenizer.inner().clone(), "target")?;
    let drafter_vocab = Vocabulary::from_tokenizer(drafter_tokenizer.inner().clone(), "drafter")?;
    let map = VocabMap::build(&target_vocab, &drafter_vocab, MatchMode::Bytes);
    let pair = Pair {
        target_vocab: &target_vocab,
        drafter_vocab: &drafter_vocab,
        target_tokenizer: &target_tokenizer,
        drafter_tokenizer: &drafter_tokenizer,
        map: &map,
        target_rows: target.config().vocab_size,
    };

    let device = DeviceChoice::Cpu.device()?;
    let mut built = hetero::build(request, &pair, drafter.load_model(&device)?, Options::default())?;
    let mut target_model = LlamaTarget::new(target.load_model(&device)?);
    let prompt = target_tokenizer.encode("The quick brown fox jumps over the lazy")?;
    let config = GenerationConfig { max_new_tokens: 24, sampling: SamplingConfig::greedy(), ..Default::default() };
    let mut rng = StdRng::seed_from_u64(0);
    let drafter: Option<&mut dyn Drafter> = Some(built.drafter.as_mut());
    let out = generate(&mut target_model, drafter, &prompt, &config, &mut rng, &mut |_| ControlFlow::Continue(()))?;

    let s = &out.stats;
    println!("{}: {}", built.choice.algo, built.choice.reason);
    println!("{:?}", target_tokenizer.decode(&out.tokens)?);
    println!("{} tokens in {} steps; {} of {} drafted tokens accepted", s.generated, s.steps, s.accepted, s.drafted);
    Ok(())
}
