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
    /// The `#[device] fn`s the kernel calls.
    pub device_fns: DeviceFns,
    /// `static const` declarations of the kernel's const generic parameters.
    pub consts: Vec<String>,
}

/// The `#[device] fn`s one kernel calls, directly or through each other: each defined
/// once, callees before their callers (C++ needs a function declared before its use).
/// Each helper's generated `collect` walks its callees first, then defines itself.
#[derive(Debug, Clone, Default)]
pub struct DeviceFns {
    /// `(key, C++ name)` of each helper begun, in order.
    begun: Vec<(&'static str, &'static str)>,
    source: String,
    headers: Vec<Header>,
    /// Declarations of the `#[derive(KernelArg)]` structs the helpers use.
    structs: Vec<String>,
}

impl DeviceFns {
    /// Starts the helper `key` (its module path and name) named `name` in C++: false if
    /// it was already collected. Two different helpers with one C++ name cannot share a
    /// translation unit: the source then carries an `#error` naming both, so the compile
    /// fails saying why.
    pub fn begin(&mut self, key: &'static str, name: &'static str) -> bool {
        if self.begun.iter().any(|b| b.0 == key) {
            return false;
        }
        if let Some((other, _)) = self.begun.iter().find(|b| b.1 == name) {
            self.source.push_str(&format!(
                "#error \"two #[device] fns named `{name}` ({other} and {key}) are called by one kernel; rename one\"\n"
            ));
        }
        self.begun.push((key, name));
        true
    }

    /// Defines a helper begun with [`DeviceFns::begin`] (after its callees), with the
    /// headers and struct declarations it needs.
    pub fn define(&mut self, source: &str, headers: &[Header], structs: Vec<String>) {
        self.source.push_str(source);
        self.headers.extend_from_slice(headers);
        self.structs.extend(structs);
    }
}

impl SourceTemplate {
    /// The complete CUDA C++ source for `inst`.
    pub fn assemble(&self, inst: &Instantiation<'_>) -> String {
        let headers: Vec<Header> = self
            .headers
            .iter()
            .copied()
            .chain(inst.generics.iter().map(|g| g.2))
            .chain(inst.device_fns.headers.iter().copied())
            .collect();
        let mut s = String::with_capacity(PRELUDE.len() + self.kernel.len() + 256);
        if headers.contains(&Header::Fp16) {
            s.push_str("#define K_FP16 1\n#include <cuda_fp16.h>\n");
        }
        if headers.contains(&Header::Bf16) {
            s.push_str("#define K_BF16 1\n#include <cuda_bf16.h>\n");
        }
        s.push_str(PRELUDE);
        // Each struct once: the kernel and its helpers may name the same one.
        let mut declared: Vec<&String> = vec![];
        for st in inst.structs.iter().chain(&inst.device_fns.structs) {
            if !declared.contains(&st) {
                declared.push(st);
                s.push_str(st);
                s.push('\n');
            }
        }
        for (name, cuda, _) in &inst.generics {
            s.push_str(&format!("typedef {cuda} {name};\n"));
        }
        for c in &inst.consts {
            s.push_str(c);
            s.push('\n');
        }
        s.push_str(&inst.device_fns.source);
        s.push_str(self.kernel);
        s
    }
}
