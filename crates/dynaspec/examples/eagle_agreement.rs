//! How often an EAGLE drafter's first drafted token is the target's greedy token, on held-out
//! chats (every tenth, as `anyspec dynaspec eagle --prompt-field` holds them out), teacher-forced
//! from the target's true features in windows of the drafter's training window: the quantity
//! the build's `valid_accuracy` estimates, measured on the runtime's own drafter (the native
//! engine) with its weights stored as f32 and as q8_0 (as `anyspec demo` stores them).
//!
//! ```sh
//! cargo run --release -p anyspec-dynaspec --example eagle_agreement -- \
//!     M.gguf assets/demo/eagle-smollm2.safetensors chats.jsonl|ids.txt [CHATS]
//! ```
//! `chats.jsonl`: one `{"prompt": …, "answer": …}` per line (`zcat
//! assets/demo/target-chats.jsonl.gz`), every tenth taken; `ids.txt`: one chat per line as
//! `prompt ids;answer ids` (space-separated token ids, e.g. the demo's prompts and
//! autoregressive outputs from `anyspec demo --save-tokens`), every line taken.

use anyspec_dynaspec::EagleFile;
use anyspec_models::{Checkpoint, DeviceChoice, LoadOptions, WeightFormat};

fn argmax(row: &[f32]) -> usize {
    (0..row.len()).fold(0, |best, i| if row[i] > row[best] { i } else { best })
}

/// The figures are the example's output.
#[allow(clippy::print_stdout)]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        return Err("usage: eagle_agreement MODEL EAGLE CHATS.jsonl [CHATS]".into());
    }
    let limit: usize = args.get(4).map_or(Ok(20), |s| s.parse())?;
    let checkpoint = Checkpoint::open(&args[1])?;
    let tokenizer = checkpoint.tokenizer()?;
    let target = checkpoint.load_model_with(&DeviceChoice::Cpu.device()?, &LoadOptions::default())?;
    let file = EagleFile::load_unchecked(std::path::Path::new(&args[2]))?;
    let window = file.info.window;
    let d = target.config().hidden_size;
    let formats = [("f32", None), ("q8_0", Some(WeightFormat::Q8_0))];
    let drafters = formats
        .iter()
        .map(|(_, f)| target.feature_model(&file.tensors, file.info.layers, *f))
        .collect::<Result<Vec<_>, _>>()?;
    let text = std::fs::read_to_string(&args[3])?;
    let (mut hits, mut steps) = (vec![0usize; drafters.len()], 0usize);
    let ids = args[3].ends_with(".txt");
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let chosen: Vec<&str> = if ids {
        lines.into_iter().take(limit).collect()
    } else {
        lines.into_iter().skip(9).step_by(10).take(limit).collect()
    };
    for line in chosen {
        let (tokens, answer_start) = if ids {
            // "prompt ids;answer ids", as `anyspec demo --save-tokens` saved them.
            let (p, a) = line.split_once(';').ok_or("no ';'")?;
            let parse = |s: &str| s.split_whitespace().map(str::parse::<u32>).collect::<Result<Vec<_>, _>>();
            let mut tokens = parse(p)?;
            let start = tokens.len();
            tokens.extend(parse(a)?);
            (tokens, start)
        } else {
            let record: serde_json::Value = serde_json::from_str(line)?;
            let field = |name: &str| record[name].as_str().map(str::to_owned).ok_or(format!("no string field {name}"));
            let (prompt, answer) = (field("prompt")?, field("answer")?);
            let mut tokens = tokenizer.encode(&checkpoint.chat_prompt(None, &prompt)?)?;
            let start = tokens.len();
            tokens.extend(tokenizer.encode(answer.trim())?);
            (tokens, start)
        };
        let n = tokens.len();
        let rows = target.forward_with_hidden(&tokens, &mut target.new_cache(), n, None)?;
        let labels: Vec<usize> = rows.logits.iter().map(|l| argmax(l)).collect();
        let from = answer_start.saturating_sub(window / 2);
        // Step i reads (x_{i+1}, f_i) and predicts f_{i+1}; its head's argmax is compared with
        // y_{i+1}, the target's greedy token after position i + 1.
        for start in (from..n - 1).step_by(window) {
            let end = (start + window).min(n - 1);
            let features: Vec<f32> = rows.hidden[start..end].concat();
            for (k, drafter) in drafters.iter().enumerate() {
                let predicted =
                    drafter.forward(&tokens[start + 1..end + 1], &features, &mut drafter.new_cache(), end - start)?;
                for (j, row) in predicted.chunks(d).enumerate() {
                    let i = start + j;
                    if i + 1 >= answer_start {
                        let logits = target.logits_of_hidden(row, None)?;
                        hits[k] += usize::from(argmax(&logits) == labels[i + 1]);
                        if k == 0 {
                            steps += 1;
                        }
                    }
                }
            }
        }
    }
    for ((name, _), hit) in formats.iter().zip(&hits) {
        println!("{name}: first-token agreement {:.4} over {steps} answer steps", *hit as f64 / steps as f64);
    }
    Ok(())
}
