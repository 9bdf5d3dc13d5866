//! Streaming a corpus: plain text or JSONL, optionally gzip-compressed, in chunks of whole lines.
//!
//! Corpora are read once, front to back, and never held in memory whole: the reader hands out
//! chunks of complete lines (about [`CHUNK_BYTES`] each) that counting threads work on while the
//! next chunk is read.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use anyspec_core::{Progress, ProgressUnit};
use flate2::read::MultiGzDecoder;

use crate::error::{Error, Result};

/// Approximate size of the chunks handed to [`for_each_chunk`]'s callback.
pub const CHUNK_BYTES: usize = 1 << 20;

/// How corpus files are read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CorpusOptions {
    /// The string field holding the text in JSONL files (files named `*.jsonl` or `*.jsonl.gz`).
    pub text_field: String,
}

impl Default for CorpusOptions {
    fn default() -> Self {
        CorpusOptions { text_field: "text".to_string() }
    }
}

/// Whether a path names a JSONL file (`.jsonl`, optionally followed by `.gz`).
fn is_jsonl(path: &Path) -> bool {
    let name = path.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
    name.ends_with(".jsonl") || name.ends_with(".jsonl.gz")
}

/// Counts the raw (compressed) bytes read, for progress.
struct CountingReader<'a, R> {
    inner: R,
    progress: &'a dyn Progress,
}

impl<R: Read> Read for CountingReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.advance(n as u64);
        Ok(n)
    }
}

/// Opens a corpus file, transparently decompressing gzip (recognised by its magic bytes, not its
/// name, so a mislabelled file still reads correctly).
fn open<'a>(path: &Path, progress: &'a dyn Progress) -> Result<Box<dyn BufRead + 'a>> {
    let mut file = File::open(path).map_err(Error::io("open", path))?;
    let mut magic = [0u8; 2];
    let got = read_up_to(&mut file, &mut magic).map_err(Error::io("read", path))?;
    drop(file);
    let file = File::open(path).map_err(Error::io("open", path))?;
    let counting = CountingReader { inner: file, progress };
    if got == 2 && magic == [0x1f, 0x8b] {
        Ok(Box::new(BufReader::with_capacity(1 << 16, MultiGzDecoder::new(BufReader::new(counting)))))
    } else {
        Ok(Box::new(BufReader::with_capacity(1 << 16, counting)))
    }
}

fn read_up_to(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

/// Total size in bytes of the files, for a progress bar with a known end.
pub fn total_size(paths: &[PathBuf]) -> Result<u64> {
    paths.iter().map(|p| Ok(std::fs::metadata(p).map_err(Error::io("read", p))?.len())).sum()
}

/// Reads every file in turn and calls `on_chunk` with chunks of whole lines of text.
///
/// Plain-text lines are passed as they are; each JSONL record contributes its text field
/// followed by a newline, so that no n-gram spans two records. Progress is reported in raw file
/// bytes under the stage name `"reading corpus"`.
///
/// # Errors
/// [`Error::Io`] for unreadable files, [`Error::InvalidUtf8`] naming the file and the byte offset
/// of the first invalid byte, [`Error::InvalidJsonl`] for a JSONL line without the text field,
/// and whatever `on_chunk` returns.
pub fn for_each_chunk(
    paths: &[PathBuf],
    options: &CorpusOptions,
    progress: &dyn Progress,
    mut on_chunk: impl FnMut(String) -> Result<()>,
) -> Result<()> {
    progress.start("reading corpus", Some(total_size(paths)?), ProgressUnit::Bytes);
    for path in paths {
        let jsonl = is_jsonl(path);
        let mut chunk = String::with_capacity(CHUNK_BYTES + (CHUNK_BYTES >> 3));
        for_each_line::<Error>(path, progress, |line_number, text| {
            if jsonl {
                if text.trim().is_empty() {
                    return Ok(());
                }
                for value in jsonl_fields(text, &[&options.text_field], path, line_number)? {
                    chunk.push_str(&value);
                }
                chunk.push('\n');
            } else {
                chunk.push_str(text);
                if !text.ends_with('\n') {
                    chunk.push('\n');
                }
            }
            if chunk.len() >= CHUNK_BYTES {
                on_chunk(std::mem::take(&mut chunk))?;
                chunk.reserve(CHUNK_BYTES + (CHUNK_BYTES >> 3));
            }
            Ok(())
        })?;
        if !chunk.is_empty() {
            on_chunk(chunk)?;
        }
    }
    progress.finish();
    Ok(())
}

/// Calls `on_line` with the 1-based number and the text of each line of one corpus file
/// (decompressed when gzipped; the text keeps its newline), failing on the first line that is not
/// UTF-8 with the byte offset of the bad byte, and stopping at the first error `on_line` returns.
fn for_each_line<E: From<Error>>(
    path: &Path,
    progress: &dyn Progress,
    mut on_line: impl FnMut(u64, &str) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    let mut reader = open(path, progress)?;
    let (mut line, mut offset, mut line_number) = (Vec::new(), 0u64, 0u64);
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line).map_err(Error::io("read", path))?;
        if n == 0 {
            return Ok(());
        }
        line_number += 1;
        let text = std::str::from_utf8(&line)
            .map_err(|e| Error::InvalidUtf8 { path: path.to_path_buf(), offset: offset + e.valid_up_to() as u64 })?;
        offset += n as u64;
        on_line(line_number, text)?;
    }
}

/// One record of a JSONL file, as [`for_each_record`] gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// The file it is in.
    pub path: &'a Path,
    /// Its 1-based line number there, for messages about it.
    pub line: u64,
    /// The string values of the fields asked for, in the order asked.
    pub fields: Vec<String>,
}

/// Reads every record of JSONL files (`*.jsonl`, optionally gzipped) and calls `on_record` with
/// the string values of `fields`, in order: (prompt, answer) pairs of a chat corpus, which
/// [`for_each_chunk`] would run together. Blank lines are skipped. Progress as
/// [`for_each_chunk`]'s. The callback's error type is the caller's (anything this crate's
/// [`Error`] converts into), so the first error it returns ends the reading.
///
/// # Errors
/// [`Error::NotJsonl`] for a file not named `.jsonl`/`.jsonl.gz`, [`Error::InvalidJsonl`] for a
/// record without one of the fields, [`Error::Io`], [`Error::InvalidUtf8`], and the first error
/// `on_record` returns.
pub fn for_each_record<E: From<Error>>(
    paths: &[PathBuf],
    fields: &[&str],
    progress: &dyn Progress,
    mut on_record: impl FnMut(Record<'_>) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    progress.start("reading corpus", Some(total_size(paths)?), ProgressUnit::Bytes);
    for path in paths {
        if !is_jsonl(path) {
            return Err(Error::NotJsonl { path: path.clone(), fields: fields.join("\", \"") }.into());
        }
        for_each_line(path, progress, |line, text| {
            if text.trim().is_empty() {
                return Ok(());
            }
            on_record(Record { path, line, fields: jsonl_fields(text, fields, path, line)? })
        })?;
    }
    progress.finish();
    Ok(())
}

/// The string values of `fields` in one JSONL line, which is parsed once for all of them.
fn jsonl_fields(line: &str, fields: &[&str], path: &Path, line_number: u64) -> Result<Vec<String>> {
    let problem = |field: &str, problem: String| Error::InvalidJsonl {
        path: path.to_path_buf(),
        line: line_number,
        field: field.to_string(),
        problem,
    };
    // No field asked for: nothing to read, and the line is not parsed (as before fields were
    // read together).
    let Some(&first) = fields.first() else { return Ok(Vec::new()) };
    let value: serde_json::Value = serde_json::from_str(line).map_err(|e| problem(first, format!("not JSON ({e})")))?;
    fields
        .iter()
        .map(|&field| match value.get(field) {
            Some(serde_json::Value::String(text)) => Ok(text.clone()),
            Some(other) => Err(problem(field, format!("field \"{field}\" is not a string but {other}"))),
            None => Err(problem(field, format!("no field \"{field}\""))),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use anyspec_core::NoProgress;

    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("anyspec-corpus-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn read_all(paths: &[PathBuf]) -> Result<String> {
        let mut all = String::new();
        for_each_chunk(paths, &CorpusOptions::default(), &NoProgress, |chunk| {
            all.push_str(&chunk);
            Ok(())
        })?;
        Ok(all)
    }

    #[test]
    fn plain_gzip_and_jsonl_give_the_same_text() {
        let dir = temp_dir("formats");
        let plain = dir.join("a.txt");
        std::fs::write(&plain, "one two\nthree").unwrap();
        let gz = dir.join("b.txt.gz");
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all("one two\nthree\n".as_bytes()).unwrap();
        std::fs::write(&gz, encoder.finish().unwrap()).unwrap();
        let jsonl = dir.join("c.jsonl");
        std::fs::write(&jsonl, "{\"text\": \"one two\", \"id\": 1}\n\n{\"text\": \"three\"}\n").unwrap();
        for path in [&plain, &gz, &jsonl] {
            assert_eq!(read_all(std::slice::from_ref(path)).unwrap(), "one two\nthree\n", "{}", path.display());
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn invalid_utf8_names_the_file_and_offset() {
        let dir = temp_dir("utf8");
        let path = dir.join("bad.txt");
        std::fs::write(&path, b"good line\nab\xffcd\n").unwrap();
        let err = read_all(std::slice::from_ref(&path)).unwrap_err();
        match &err {
            Error::InvalidUtf8 { offset, .. } => assert_eq!(*offset, 12),
            other => panic!("expected InvalidUtf8, got {other:?}"),
        }
        assert!(err.to_string().contains("bad.txt") && err.to_string().contains("12"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn records_give_their_fields_in_order_and_refuse_plain_text() {
        let dir = temp_dir("records");
        let path = dir.join("chats.jsonl");
        std::fs::write(
            &path,
            "{\"prompt\": \"p1\", \"answer\": \"a\\n\\nb\"}\n\n{\"answer\": \"c\", \"prompt\": \"p2\"}\n",
        )
        .unwrap();
        let mut got = Vec::new();
        for_each_record(std::slice::from_ref(&path), &["prompt", "answer"], &NoProgress, |r| {
            assert_eq!(r.path, path.as_path());
            got.push((r.line, r.fields));
            Ok::<_, Error>(())
        })
        .unwrap();
        let pair = |a: &str, b: &str| vec![a.to_string(), b.to_string()];
        assert_eq!(got, vec![(1, pair("p1", "a\n\nb")), (3, pair("p2", "c"))]);
        let missing =
            for_each_record(std::slice::from_ref(&path), &["prompt", "reply"], &NoProgress, |_| Ok::<_, Error>(()));
        assert!(missing.unwrap_err().to_string().contains("\"reply\""));
        // The callback's first error ends the reading.
        let mut seen = 0;
        let stopped = for_each_record(std::slice::from_ref(&path), &["prompt"], &NoProgress, |r| {
            seen += 1;
            Err(Error::Corrupt { path: r.path.to_path_buf(), problem: format!("stop at line {}", r.line) })
        });
        assert!(stopped.unwrap_err().to_string().contains("stop at line 1"));
        assert_eq!(seen, 1);
        let plain = dir.join("chats.txt");
        std::fs::write(&plain, "p1\n").unwrap();
        let err = for_each_record(std::slice::from_ref(&plain), &["prompt"], &NoProgress, |_| Ok::<_, Error>(()))
            .unwrap_err();
        assert!(
            err.to_string().contains("chats.txt is not a JSONL file") && err.to_string().contains("*.jsonl"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn jsonl_without_the_field_is_a_clear_error() {
        let dir = temp_dir("jsonl");
        let path = dir.join("x.jsonl");
        std::fs::write(&path, "{\"text\": \"fine\"}\n{\"body\": \"no\"}\n").unwrap();
        let err = read_all(std::slice::from_ref(&path)).unwrap_err().to_string();
        assert!(err.contains("line 2") && err.contains("\"text\""), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
