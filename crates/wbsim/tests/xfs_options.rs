//! XFS mkfs and mount options in a scenario reach the filesystem model
//! (`agcount`, `agsize`, `allocsize`, `inode64`, `logbsize`), and invalid
//! ones are errors naming the scenario line and the key.

mod common;
use common::run_text;

use wbsim::experiment::scenario::{self, ErrorKind};

const BASE: &str = "[scenario]\nname = \"t\"\nduration = \"2s\"\n\n[machine]\ncpus = 2\nmemory = \"1g\"\n\n[[device]]\nname = \"d\"\nprofile = \"pmem\"\n\n[[filesystem]]\nname = \"f\"\ntype = \"xfs\"\ndevice = \"d\"\nmountpoint = \"/mnt/f\"\n";

fn error_for(options: &str) -> scenario::ScenarioError {
    let text = format!("{BASE}options = {{ {options} }}\n");
    match scenario::parse_str(&text, "x.toml") {
        Ok(_) => panic!("expected an error for options {options}"),
        Err(e) => e,
    }
}

#[test]
fn invalid_xfs_options_name_the_line_and_key() {
    let line = BASE.lines().count() as u32 + 1;
    for (opts, key, kind) in [
        ("logbsize = \"48k\"", "logbsize", ErrorKind::OutOfRange),
        ("allocsize = \"3k\"", "allocsize", ErrorKind::OutOfRange),
        ("agsize = \"1m\"", "agsize", ErrorKind::OutOfRange),
        ("inode64 = false", "inode64", ErrorKind::InvalidValue),
        ("agcount = 0", "agcount", ErrorKind::OutOfRange),
        ("agblocks = 4", "agblocks", ErrorKind::UnknownKey),
    ] {
        let e = error_for(opts);
        let shown = e.to_string();
        assert_eq!(e.kind, kind, "{shown}");
        assert_eq!(e.line, line, "{shown}");
        assert_eq!(e.key.as_deref(), Some(key), "{shown}");
        assert!(shown.starts_with(&format!("x.toml:{line}:")), "{shown}");
    }
    // Valid ones parse.
    let text = format!(
        "{BASE}options = {{ agcount = 2, agsize = \"1g\", allocsize = \"1m\", inode64 = true, logbsize = \"256k\" }}\n"
    );
    scenario::parse_str(&text, "x.toml").unwrap_or_else(|e| panic!("{e}"));
}

/// Writes 1 MiB into a file in each of `dirs` directories on a filesystem
/// with `options`, one after another (each job's fsync allocates its blocks,
/// alone, so no trylock pass moves an allocation to another AG); returns the
/// AGs whose AGF lock was taken.
fn agf_used(options: &str, dirs: usize) -> Vec<usize> {
    let mut jobs = String::new();
    for i in 0..dirs {
        jobs.push_str(&format!(
            "[w{i}]\ndirectory=/mnt/f/d{i}\nrw=write\nsize=1m\nfallocate=none\nend_fsync=1\nstartdelay={}ms\n",
            i * 300
        ));
    }
    let text = format!(
        "{BASE}options = {{ {options} }}\n\n[[job]]\nfilesystem = \"f\"\nfio = \"\"\"\n{jobs}\"\"\"\n"
    );
    let r = run_text(&text);
    (0..8)
        .filter(|a| {
            r.stat(&format!("lock.xfs_agf:ag{a}.write.acquisitions"), "value")
                .is_some_and(|n| n > 0.0)
        })
        .collect()
}

#[test]
fn agcount_sets_the_allocation_groups_directories_rotate_over() {
    // Three directories rotate over two AGs: AG 0, 1, 0.
    assert_eq!(agf_used("agcount = 2", 3), vec![0, 1]);
    // The default, 4 AGs: directories 0..3 land in AG 0..3.
    assert_eq!(agf_used("inode64 = true", 3), vec![0, 1, 2]);
}

/// fio refuses a `directory=` that does not exist, so the directories of a
/// job file are made before fio creates any file: with eight directories
/// over four AGs each AG first takes two directory inodes, then two file
/// inodes (AG 0: 131, 132 then 133, 134; the others 128, 129 then 130, 131).
/// Under `ino_mod` with two contexts the files' parity then gives each
/// context one file of every AG, four files each; had each directory been
/// made just before its file (d0, f0, d1, f1, ...), both files of AG 0
/// would have even numbers and the other six odd ones (two and six).
#[test]
fn fio_directories_are_made_before_the_files_so_inode_numbers_follow() {
    let mut jobs = String::new();
    for i in 0..8 {
        jobs.push_str(&format!(
            "[w{i}]\ndirectory=/mnt/f/d{i}\nrw=write\nsize=1m\nbs=1m\nfallocate=none\n"
        ));
    }
    // Left to the flushers: the periodic writeback after dirty_expire
    // (30 s) writes each context's files while a last job waits.
    jobs.push_str("[late]\nfilename=/mnt/f/late\nstartdelay=36s\nrw=write\nsize=4k\n");
    let text = format!(
        "{}\n[variants.default]\nnr_wb_ctx = 2\nwb_ctx_assign = \"ino_mod\"\n\n[[job]]\nfilesystem = \"f\"\nfio = \"\"\"\n{jobs}\"\"\"\n",
        BASE.replace("duration = \"2s\"", "duration = \"40s\"")
    );
    let r = run_text(&text);
    let pages: Vec<f64> = (0..2)
        .map(|c| {
            r.stat(&format!("wb.f.ctx{c}.pages_written"), "value")
                .unwrap_or(0.0)
        })
        .collect();
    // 4 files of 1 MiB (256 pages) in each context.
    assert_eq!(pages, vec![1024.0, 1024.0], "pages written per context");
}
