//! Build script. The desktop shell's `tauri_build::build()` call joins this
//! file, behind `#[cfg(feature = "desktop")]`, together with the shell itself.
fn main() {
    println!("cargo:rerun-if-changed=src-tauri/build.rs");
}
