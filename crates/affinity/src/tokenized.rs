//! Streaming a corpus through a tokenizer on every core.
//!
//! The corpus is read by `anyspec-dict-builder`'s reader (plain text or JSONL, gzip or not) in
//! chunks of whole lines; worker threads tokenize each line on its own (without special tokens)
//! and fold its ids into per-thread state, which the caller merges. Windows and frequencies
//! therefore never span two lines (two JSONL documents), and the result does not depend on how
//! the corpus was cut into chunks.

use std::path::PathBuf;
use std::sync::{Mutex, mpsc};

use anyspec_core::Progress;
use anyspec_dict_builder::{CorpusOptions, for_each_chunk};
use tokenizers::Tokenizer;

use crate::error::{Error, Result};

/// Resolves a thread count: 0 means every available core.
pub(crate) fn resolve_threads(threads: usize) -> usize {
    if threads == 0 { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { threads }
}

/// Tokenizes every non-empty line of `text` and hands its ids to `work`.
pub(crate) fn tokenize_lines(
    tokenizer: &Tokenizer,
    text: &str,
    mut work: impl FnMut(&[u32]) -> Result<()>,
) -> Result<()> {
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        let encoding = tokenizer
            .encode_fast(line, false)
            .map_err(|err| Error::Tokenizer { text: line.chars().take(40).collect(), message: err.to_string() })?;
        work(encoding.get_ids())?;
    }
    Ok(())
}

/// Streams `paths`, tokenizes each line with `tokenizer` on `threads` workers (0 = every core)
/// and returns one state per worker, each built by `init` and updated by `work`.
pub(crate) fn fold_tokenized<S: Send>(
    paths: &[PathBuf],
    options: &CorpusOptions,
    tokenizer: &Tokenizer,
    threads: usize,
    progress: &dyn Progress,
    init: impl Fn() -> S + Sync,
    work: impl Fn(&mut S, &[u32]) -> Result<()> + Sync,
) -> Result<Vec<S>> {
    let threads = resolve_threads(threads);
    let (sender, receiver) = mpsc::sync_channel::<String>(threads * 2);
    let receiver = Mutex::new(receiver);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let (receiver, init, work) = (&receiver, &init, &work);
                scope.spawn(move || -> Result<S> {
                    let mut state = init();
                    let mut failed = None;
                    loop {
                        // The lock is held only while waiting for the next chunk.
                        let chunk = match receiver.lock() {
                            Ok(guard) => guard.recv(),
                            Err(_) => break,
                        };
                        let Ok(text) = chunk else { break };
                        // After an error the worker keeps draining the channel, so that the
                        // reader never blocks on a full channel nobody empties.
                        if failed.is_none()
                            && let Err(err) = tokenize_lines(tokenizer, &text, |ids| work(&mut state, ids))
                        {
                            failed = Some(err);
                        }
                    }
                    match failed {
                        Some(err) => Err(err),
                        None => Ok(state),
                    }
                })
            })
            .collect();
        let read = for_each_chunk(paths, options, progress, |chunk| {
            // Workers drain the channel until it closes, so a send cannot fail or block for good.
            let _ = sender.send(chunk);
            Ok(())
        });
        drop(sender);
        let mut states = Vec::with_capacity(workers.len());
        let mut first_error = None;
        for worker in workers {
            match worker.join() {
                Ok(Ok(state)) => states.push(state),
                Ok(Err(err)) => {
                    first_error.get_or_insert(err);
                }
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        read.map_err(Error::Corpus)?;
        match first_error {
            Some(err) => Err(err),
            None => Ok(states),
        }
    })
}

/// Names the corpus files for artifacts and messages: their file names, comma-separated.
pub fn describe_corpus(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.file_name().map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().into_owned()))
        .collect::<Vec<_>>()
        .join(", ")
}
