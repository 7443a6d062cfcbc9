//! GPU interrupts taken by this machine, from the nvidia driver's lines of
//! `/proc/interrupts`.
//!
//! Why a GPU library counts them: an interrupt holds the CPU that takes it for tens of
//! microseconds in a virtual machine (~28 µs on the H200 host), and a thread spinning
//! there for a reply — an actor waiting for its GPU work, or the caller waiting for the
//! actor — sees it that much later. The runtime's own paths raise none (`sys::pinned`
//! explains the one they used to); a count that grows with the calls of a program points
//! at a CUDA feature that signals its completion by interrupt (blocking-sync events,
//! host functions), and a benchmark can show it next to its timings.

/// Interrupts the nvidia driver has taken since boot, over all CPUs (and all GPUs of the
/// machine). `None` where `/proc/interrupts` cannot be read (not Linux) or lists no
/// nvidia interrupt (no driver loaded).
pub fn gpu_interrupts() -> Option<u64> {
    let table = std::fs::read_to_string("/proc/interrupts").ok()?;
    parse(&table)
}

/// The sum of the per-CPU counts of the lines naming the nvidia driver.
fn parse(table: &str) -> Option<u64> {
    let mut lines = table.lines().filter(|l| l.contains("nvidia")).peekable();
    lines.peek()?;
    Some(
        lines
            .map(|l| {
                let counts = l.split_once(':').map_or("", |(_, rest)| rest);
                counts
                    .split_whitespace()
                    .map_while(|w| w.parse::<u64>().ok())
                    .sum::<u64>()
            })
            .sum(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The nvidia lines' per-CPU counts are summed (not the IRQ number, not the digits in
    /// the device's name); other lines are ignored; no nvidia line gives `None`.
    #[test]
    fn counts_come_from_the_nvidia_lines_only() {
        let table = "           CPU0       CPU1       CPU2\n\
  28:          3          0          1   PCI-MSIX-0000:00:05.0   0-edge      virtio4-config\n\
  42:          5          0        188   PCI-MSIX-0000:00:06.0   0-edge      nvidia\n\
  43:          0         12          0   PCI-MSIX-0000:00:06.0   1-edge      nvidia\n\
 LOC:        791         32         46   Local timer interrupts\n";
        assert_eq!(parse(table), Some(205));
        assert_eq!(parse("           CPU0\n  28:  3   virtio\n"), None);
        assert_eq!(parse(""), None);
    }
}
