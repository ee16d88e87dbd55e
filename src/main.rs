//! The `stockade` command line.

fn main() {}
