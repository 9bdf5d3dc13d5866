//! `anyspec completions <shell>`: a completion script for the shell, on stdout.

use std::io::Write;

/// Prints a shell completion script on stdout.
///
/// bash: `anyspec completions bash > ~/.local/share/bash-completion/completions/anyspec`;
/// zsh: `anyspec completions zsh > "${fpath[1]}/_anyspec"`;
/// fish: `anyspec completions fish > ~/.config/fish/completions/anyspec.fish`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The shell the script is for.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

pub(crate) fn run(args: Args, mut command: clap::Command) -> anyhow::Result<()> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "anyspec", &mut script);
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(&script)?;
    stdout.flush()?;
    Ok(())
}
