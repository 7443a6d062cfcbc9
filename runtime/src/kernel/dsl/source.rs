//! Assembling the CUDA C++ of one instantiation of a `#[kernel]`.
//!
//! The macro translates the body once, with generic parameters left as names (`T`); a
//! launch for `T = f32` prepends `using T = float;`, the headers the types need, the
//! helper prelude and the declarations of `#[derive(KernelArg)]` structs. Instantiation
//! happens for the types a program actually launches (and for `precompile_all`).

use super::scalar::Header;

/// The helpers generated code calls (math on every float type, atomics, lane id).
pub const PRELUDE: &str = include_str!("prelude.cuh");

/// What the macro knows about a kernel's source, fixed at compile time.
#[derive(Debug, Clone, Copy)]
pub struct SourceTemplate {
    /// The `extern "C" __global__` function, generic names unresolved.
    pub kernel: &'static str,
    /// Headers the body's own concrete types need.
    pub headers: &'static [Header],
}

/// One instantiation's inputs: generic names bound to CUDA types, struct declarations.
#[derive(Debug, Clone, Default)]
pub struct Instantiation<'a> {
    /// `(name, cuda type, header)` per generic parameter.
    pub generics: Vec<(&'a str, &'a str, Header)>,
    /// `struct … { … };` of each `#[derive(KernelArg)]` parameter type.
    pub structs: Vec<String>,
}

impl SourceTemplate {
    /// The complete CUDA C++ source for `inst`.
    pub fn assemble(&self, inst: &Instantiation<'_>) -> String {
        let headers: Vec<Header> = self
            .headers
            .iter()
            .copied()
            .chain(inst.generics.iter().map(|g| g.2))
            .collect();
        let mut s = String::with_capacity(PRELUDE.len() + self.kernel.len() + 256);
        if headers.contains(&Header::Fp16) {
            s.push_str("#define K_FP16 1\n#include <cuda_fp16.h>\n");
        }
        if headers.contains(&Header::Bf16) {
            s.push_str("#define K_BF16 1\n#include <cuda_bf16.h>\n");
        }
        s.push_str(PRELUDE);
        for st in &inst.structs {
            s.push_str(st);
            s.push('\n');
        }
        for (name, cuda, _) in &inst.generics {
            s.push_str(&format!("typedef {cuda} {name};\n"));
        }
        s.push_str(self.kernel);
        s
    }
}
