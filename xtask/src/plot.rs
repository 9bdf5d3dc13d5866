//! What the figures of the reproductions share.

/// Registers a system sans-serif font as plotters' "sans-serif"; `false` when the machine has
/// none of the usual ones, and the figure is then skipped.
pub(crate) fn register_font() -> anyhow::Result<bool> {
    let candidates = [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
        "/usr/share/fonts/dejavu/DejaVuSans.ttf",
        "/Library/Fonts/Arial.ttf",
        "C:\\Windows\\Fonts\\arial.ttf",
    ];
    let Some(bytes) = candidates.iter().find_map(|p| std::fs::read(p).ok()) else { return Ok(false) };
    // plotters keeps the font for the rest of the process.
    let font: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    plotters::style::register_font("sans-serif", plotters::style::FontStyle::Normal, font)
        .map_err(|_| anyhow::anyhow!("the system font could not be parsed"))?;
    Ok(true)
}
