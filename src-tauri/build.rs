//! Build script: with the `desktop` feature, tauri-build reads
//! `tauri.conf.json` (at the repository root) and the capabilities in
//! `src-tauri/capabilities/`; without it there is nothing to do.
fn main() {
    println!("cargo:rerun-if-changed=src-tauri/build.rs");
    #[cfg(feature = "desktop")]
    {
        println!("cargo:rerun-if-changed=src-tauri/capabilities");
        println!("cargo:rerun-if-changed=tauri.conf.json");
        let attributes = tauri_build::Attributes::new()
            .capabilities_path_pattern("./src-tauri/capabilities/**/*");
        if let Err(e) = tauri_build::try_build(attributes) {
            println!("cargo:warning=tauri-build failed: {e:#}");
            std::process::exit(1);
        }
    }
}
