//! Rows of the bench table, printed on stdout as `ROW<TAB>what<TAB>ours<TAB>floor<TAB>ratio` so
//! `bench/run` can gather every part's rows into one table; anything else on stdout is ignored.

/// Prints a row comparing two measurements in the same unit (ratio = ours / floor).
pub fn compare(what: &str, ours: f64, floor: f64, unit: &str) {
    let ratio = if floor > 0.0 {
        format!("{:.2}", ours / floor)
    } else {
        "-".to_string()
    };
    println!(
        "ROW\t{what}\t{}\t{}\t{ratio}",
        fmt(ours, unit),
        fmt(floor, unit)
    );
}

/// Prints a row without a floor (a count or a size), with `note` in the floor column.
pub fn single(what: &str, ours: &str, note: &str) {
    println!("ROW\t{what}\t{ours}\t{note}\t-");
}

fn fmt(value: f64, unit: &str) -> String {
    if value >= 100.0 {
        format!("{value:.0} {unit}")
    } else {
        format!("{value:.2} {unit}")
    }
}

/// The `p`th percentile (nearest rank) of `v`.
pub fn pct(v: &[f64], p: usize) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = (p * v.len()).div_ceil(100).clamp(1, v.len());
    v[rank - 1]
}
