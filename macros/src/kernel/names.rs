//! The names generated CUDA C++ cannot take: C++ keywords, CUDA's built-in names and the
//! prefixes of our own prelude. Both the signature check (a kernel's name is its entry
//! point) and the translator (every binding becomes a C++ name) ask here.

/// C++ keywords and names of the generated source a Rust identifier must not become.
const RESERVED: &[&str] = &[
    "auto",
    "bool",
    "case",
    "char",
    "class",
    "const",
    "default",
    "delete",
    "do",
    "double",
    "float",
    "goto",
    "inline",
    "int",
    "long",
    "namespace",
    "new",
    "operator",
    "private",
    "protected",
    "public",
    "register",
    "short",
    "signed",
    "sizeof",
    "switch",
    "template",
    "this",
    "throw",
    "typedef",
    "typename",
    "union",
    "unsigned",
    "using",
    "virtual",
    "void",
    "volatile",
    "threadIdx",
    "blockIdx",
    "blockDim",
    "gridDim",
    "warpSize",
    "signed",
    "NULL",
    "nullptr",
];

/// True for a name the generated CUDA C++ cannot use as is: a C++ keyword or reserved
/// name, our prelude's `k_` prefix, or a leading `__`.
pub(crate) fn reserved(name: &str) -> bool {
    RESERVED.contains(&name) || name.starts_with("k_") || name.starts_with("__")
}

/// A Rust name's C++ spelling: itself, or with a `_` suffix where it is reserved.
pub(crate) fn param_cname(name: &str) -> String {
    if reserved(name) {
        format!("{name}_")
    } else {
        name.to_string()
    }
}
