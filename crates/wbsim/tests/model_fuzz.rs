//! Model fuzz: small random scenarios, generated from a few knobs (fs type,
//! number of jobs, file size, block size, rw mode, duration 1-2 s, an
//! optional umount/mount actor), run to completion with every invariant
//! holding: no violation recorded (page conservation at the end, no counter
//! gone negative, nothing done on a torn-down superblock; the model records
//! these as violations), and every job's data on disk: each job is finite
//! with `end_fsync=1`, and a final `sync` actor runs after the jobs, after
//! which the sampled dirty and writeback pages are zero. A fixed number of
//! cases from a fixed seed (`WBSIM_MODEL_FUZZ_CASES`, default 12), so a
//! failure reproduces from the printed case.

use wbsim::experiment::runner::{plan, run_one, RunOptions};
use wbsim::experiment::scenario::parse_str;

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x % n
    }
    fn pick<'a>(&mut self, v: &[&'a str]) -> &'a str {
        v[self.below(v.len() as u64) as usize]
    }
}

/// A scenario from the knobs drawn from `rng`; returns (text, summary).
fn scenario(rng: &mut Rng, case: u64) -> (String, String) {
    let fs = rng.pick(&["xfs", "ext4", "btrfs", "tmpfs"]);
    let jobs = 1 + rng.below(4);
    let size_m = 1 + rng.below(48);
    let bs = rng.pick(&["4k", "64k", "1m"]);
    let rw = rng.pick(&["write", "randwrite", "rw", "read", "randrw"]);
    let duration_ms = 1000 + rng.below(1001);
    let remount = fs != "tmpfs" && rng.below(2) == 0;
    let device = if fs == "tmpfs" {
        String::new()
    } else {
        "[[device]]\nname = \"d\"\nprofile = \"qemu-nvme\"\n\n".to_string()
    };
    let fs_dev = if fs == "tmpfs" {
        ""
    } else {
        "device = \"d\"\n"
    };
    // The final sync runs after the jobs (which end well before: at most
    // 4 x 48 MiB through the page cache), then the run ends.
    let sync_at = duration_ms * 3 / 4;
    let mut text = format!(
        "[scenario]\nname = \"fuzz-{case}\"\nduration = \"{duration_ms}ms\"\nseed = {case}\n\n\
         [machine]\ncpus = 2\nmemory = \"2g\"\n\n{device}\
         [[filesystem]]\nname = \"f\"\ntype = \"{fs}\"\n{fs_dev}\n\
         [[job]]\nfilesystem = \"f\"\nfio = \"\"\"\n[j]\nrw={rw}\nbs={bs}\nsize={size_m}m\n\
         numjobs={jobs}\nend_fsync=1\n\"\"\"\n\n\
         [[actor]]\nname = \"final-sync\"\nstart = \"{sync_at}ms\"\n\
         steps = [ {{ op = \"sync\", end_run_after = \"50ms\" }} ]\n"
    );
    if remount {
        // A second filesystem mounted, written, unmounted (lazily or not)
        // while the jobs run: teardown with pages in flight.
        let lazy = rng.below(2) == 0;
        text.push_str(&format!(
            "\n[[device]]\nname = \"e\"\nprofile = \"qemu-nvme\"\n\n\
             [[filesystem]]\nname = \"g\"\ntype = \"{fs}\"\ndevice = \"e\"\nmounted = false\n\n\
             [[actor]]\nname = \"churn\"\nstart = \"10ms\"\nrepeat = 2\nsteps = [\n\
             {{ op = \"mount\", filesystem = \"g\" }},\n\
             {{ op = \"write\", file = \"/mnt/g/x\", size = \"2m\", bs = \"64k\" }},\n\
             {{ op = \"umount\", filesystem = \"g\", lazy = {lazy} }},\n]\n"
        ));
    }
    let summary = format!(
        "fs={fs} jobs={jobs} size={size_m}m bs={bs} rw={rw} duration={duration_ms}ms remount={remount}"
    );
    (text, summary)
}

#[test]
fn random_small_scenarios_keep_every_invariant() {
    let cases: u64 = std::env::var("WBSIM_MODEL_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    let mut rng = Rng(0x005E_ED0F_F022);
    for case in 0..cases {
        let (text, summary) = scenario(&mut rng, case);
        let sc = parse_str(&text, &format!("model-fuzz-{case}.toml"))
            .unwrap_or_else(|e| panic!("case {case} ({summary}): {e}\n{text}"));
        wbsim::experiment::validate::validate(&sc)
            .unwrap_or_else(|e| panic!("case {case} ({summary}): {e:#}\n{text}"));
        let runs = plan(&sc, &RunOptions::default()).expect("plan");
        let (v, seed) = &runs[0];
        let r = run_one(&sc, v, *seed, &RunOptions::default())
            .unwrap_or_else(|e| panic!("case {case} ({summary}): {e}\n{text}"));
        assert!(
            r.invariants.violations.is_empty(),
            "case {case} ({summary}): {:?}\n{text}",
            r.invariants.violations
        );
        for m in ["dirty_pages", "writeback_pages"] {
            let last = r
                .series
                .get(m)
                .and_then(|s| s.last().map(|p| p.1))
                .unwrap_or_else(|| panic!("case {case}: no series {m}"));
            assert_eq!(
                last, 0.0,
                "case {case} ({summary}): {m} after the final sync\n{text}"
            );
        }
        println!("case {case}: {summary}: ok");
    }
}
