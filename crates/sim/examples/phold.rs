//! PHOLD on the wbsim engine as a command: `phold N EVENTS [--async] [--seed S]`
//! prints one JSON line `{"engine":..,"variant":..,"N":..,"events":..,"secs":..,
//! "events_per_s":..}`. Used by `benches/peers/run.sh` to compare wbsim with
//! NeXosim and SimPy; the model itself lives in `benches/phold.rs`.

#[allow(dead_code)]
#[path = "../benches/phold.rs"]
mod phold;

fn usage() -> ! {
    eprintln!("usage: phold N EVENTS [--async] [--seed S]");
    std::process::exit(2);
}

fn main() {
    let mut pos = Vec::new();
    let mut use_async = false;
    let mut seed = 1u64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--async" => use_async = true,
            "--seed" => match args.next().and_then(|s| s.parse().ok()) {
                Some(s) => seed = s,
                None => usage(),
            },
            _ => match a.parse::<u64>() {
                Ok(v) => pos.push(v),
                Err(_) => usage(),
            },
        }
    }
    let [n, events] = pos[..] else { usage() };
    if n == 0 || n > u64::from(u32::MAX) || events == 0 {
        usage();
    }
    let r = if use_async {
        phold::run_async(n as usize, events, seed)
    } else {
        phold::run_callback(n as usize, events, seed)
    };
    println!(
        "{{\"engine\":\"wbsim\",\"variant\":\"{}\",\"N\":{},\"events\":{},\"secs\":{:.6},\"events_per_s\":{:.1},\"sim_ns\":{}}}",
        if use_async { "async" } else { "callback" },
        r.n,
        r.events,
        r.secs,
        r.events_per_s(),
        r.sim_ns
    );
}
