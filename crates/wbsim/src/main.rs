use clap::Parser;

fn main() {
    let cli = wbsim::cli::Cli::parse();
    match wbsim::cli::main_with(cli) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("wbsim: error: {e:#}");
            std::process::exit(2);
        }
    }
}
