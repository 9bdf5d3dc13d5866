//! Speculative sampling by hand, and why it is lossless: a drafter proposes one token from q,
//! the target verifies it against p, and the token that comes out is distributed as p whatever
//! q is. The empirical frequencies over many steps are printed beside p, and the acceptance
//! rate beside its closed form α = Σ min(p, q) (speculative-decoding.txt).
//! `cargo run -p anyspec-core --example verify`.
#![allow(clippy::print_stdout)]

use anyspec_core::sampling::sample;
use anyspec_core::theory::{acceptance_rate, expected_tokens_per_step};
use anyspec_core::verify::speculative_sampling;
use rand::SeedableRng;
use rand::rngs::StdRng;

fn main() -> Result<(), anyspec_core::Error> {
    // The target's distribution at the drafted position and after it (γ + 1 = 2 rows), and the
    // drafter's at the drafted one: it favours token 2, which the target finds unlikely.
    let p = [vec![0.5f32, 0.3, 0.1, 0.1], vec![0.25, 0.25, 0.25, 0.25]];
    let q = [vec![0.2f32, 0.2, 0.5, 0.1]];
    let mut rng = StdRng::seed_from_u64(7);

    let (steps, mut accepted) = (200_000, 0usize);
    let mut first = [0usize; 4];
    for _ in 0..steps {
        let drafted = sample(&q[0], &mut rng)?;
        let verdict = speculative_sampling(&p, &[drafted], &q, &mut rng)?;
        // The first token of the step: the draft when accepted, else the correction.
        let token = if verdict.accepted == 1 { drafted } else { verdict.next_token };
        first[token as usize] += 1;
        accepted += verdict.accepted;
    }

    println!("token  target p  emitted (n = {steps})");
    for (t, &n) in first.iter().enumerate() {
        println!("{t:>5}  {:>8.3}  {:>7.3}", p[0][t], n as f64 / steps as f64);
    }
    let alpha = acceptance_rate(&p[0], &q[0])?;
    println!("acceptance: {:.3} measured, α = Σ min(p, q) = {alpha:.3}", accepted as f64 / steps as f64);
    println!("with γ = 4 drafts at that α a step yields {:.2} tokens on average", expected_tokens_per_step(alpha, 4)?);
    Ok(())
}
