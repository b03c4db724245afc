//! Solves seeded instances of the linked-VNF family (`vnfm_benches::links_family`) and prints,
//! per instance, the answer, its lower bound and gap, the search nodes and the CPU time of the
//! solve (this thread's).
//!
//! `cargo run --release -p vnfm-benches --example links_family -- N M SEEDS [dense] [SECONDS]`
//! (seeds 1..=SEEDS; `dense`: the dense shape; SECONDS: the time limit, default 10; the node
//! limit is `u64::MAX`).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use vnfm_benches::links_family::{problem, solve_timed, Shape};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |k: usize, d: f64| args.get(k).and_then(|a| a.parse::<f64>().ok()).unwrap_or(d);
    let (n, m, seeds) = (
        num(0, 20.0) as usize,
        num(1, 50.0) as usize,
        num(2, 10.0) as u64,
    );
    let dense = args.iter().any(|a| a == "dense");
    let limit = args
        .iter()
        .skip(3)
        .find_map(|a| a.parse::<f64>().ok())
        .unwrap_or(10.0);
    let shape = if dense {
        Shape::dense(n, m)
    } else {
        Shape::family(n, m)
    };
    let mut times = Vec::new();
    for seed in 1..=seeds {
        let p = problem(shape, seed);
        let (sol, cpu) = solve_timed(&p, limit);
        println!(
            "{n}x{m}{} seed {seed}: {}, {} nodes, {:.3} s CPU",
            if dense { " dense" } else { "" },
            vnfm_benches::links_family::describe(&sol),
            sol.stats.nodes,
            cpu
        );
        times.push(cpu);
    }
    times.sort_by(f64::total_cmp);
    if let (Some(med), Some(worst)) = (times.get(times.len() / 2), times.last()) {
        println!("median {med:.3} s, worst {worst:.3} s CPU");
    }
}
