//! Writing results: human tables or JSON on stdout, and warnings.
//!
//! Every `--json` output is one object with a `warnings` array (empty when all is well), so a
//! script sees what a person reading stderr sees: [`warn`] prints a warning on stderr and keeps
//! it for the [`print_json`] that ends the command.

use std::io::{self, Write};
use std::sync::Mutex;

use serde::Serialize;
use serde_json::Value;

/// The warnings of this command so far, for its `--json` output.
static WARNINGS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Warns on stderr (through `tracing`, so `-q` silences it) and lists the warning in the
/// `warnings` array of the command's `--json` output.
pub(crate) fn warn(message: impl Into<String>) {
    let message = message.into();
    tracing::warn!("{message}");
    WARNINGS.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(message);
}

/// Prints `value` (an object) as pretty JSON followed by a newline, with a `warnings` array:
/// the object's own, if it has one, followed by those given to [`warn`] that it lacks.
pub(crate) fn print_json<T: Serialize>(value: &T) -> anyhow::Result<()> {
    let collected = std::mem::take(&mut *WARNINGS.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    let value = with_warnings(serde_json::to_value(value)?, collected);
    let mut stdout = io::stdout().lock();
    serde_json::to_writer_pretty(&mut stdout, &value)?;
    writeln!(stdout)?;
    Ok(())
}

/// `value` with `warnings` added to its `warnings` array (created when missing). Every report
/// is an object; anything else (a bug) is wrapped as `{"result": value, "warnings": […]}` rather
/// than printed without its warnings.
fn with_warnings(value: Value, warnings: Vec<String>) -> Value {
    let mut object = match value {
        Value::Object(map) => map,
        other => serde_json::Map::from_iter([("result".to_string(), other)]),
    };
    let list = object.entry("warnings").or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(items) = list {
        for warning in warnings {
            let warning = Value::String(warning);
            if !items.contains(&warning) {
                items.push(warning);
            }
        }
    }
    Value::Object(object)
}

/// Prints lines of text.
pub(crate) fn print_text(text: &str) -> anyhow::Result<()> {
    let mut stdout = io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    if !text.ends_with('\n') {
        writeln!(stdout)?;
    }
    Ok(())
}

/// A closed pipe (`anyspec … | head`) ends output early; that is not a failure.
pub(crate) fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause.downcast_ref::<io::Error>().is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
            || cause
                .downcast_ref::<serde_json::Error>()
                .is_some_and(|e| e.io_error_kind() == Some(io::ErrorKind::BrokenPipe))
    })
}

/// How tables and messages name a drafter made of the target's first layers: `first_layers(1)`
/// is "first layer", `first_layers(3)` "first 3 layers".
pub(crate) fn first_layers(layers: usize) -> String {
    if layers == 1 { "first layer".into() } else { format!("first {layers} layers") }
}

/// Formats rows as an aligned text table with a header rule.
pub(crate) fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        padded.join("  ").trim_end().to_string()
    };
    let mut out = line(header.to_vec());
    out.push('\n');
    out.push_str(&line(widths.iter().map(|w| "─".repeat(*w)).collect::<Vec<_>>().iter().map(String::as_str).collect()));
    out.push('\n');
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{first_layers, with_warnings};
    use serde_json::json;

    #[test]
    fn one_layer_is_named_in_the_singular() {
        assert_eq!(first_layers(1), "first layer");
        assert_eq!(first_layers(2), "first 2 layers");
    }

    #[test]
    fn every_report_gets_a_warnings_array_with_the_collected_warnings_once() {
        assert_eq!(with_warnings(json!({"a": 1}), vec![]), json!({"a": 1, "warnings": []}));
        assert_eq!(
            with_warnings(json!({"warnings": ["x"]}), vec!["x".into(), "y".into()]),
            json!({"warnings": ["x", "y"]})
        );
        assert_eq!(with_warnings(json!([1, 2]), vec!["w".into()]), json!({"result": [1, 2], "warnings": ["w"]}));
    }
}
