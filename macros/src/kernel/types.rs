//! The types a kernel body works with, as the translator tracks them: enough to pick
//! the C++ type of a `let`, the width of a literal and the operator a Rust operator
//! becomes (`%` on floats is `fmod`, `!` on integers is `~`).

/// A concrete scalar type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Prim {
    F32,
    F64,
    F16,
    Bf16,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    Usize,
    Isize,
    Bool,
}

/// The `(rust, prim, cuda)` table, one place for every scalar.
const PRIMS: &[(&str, Prim, &str)] = &[
    ("f32", Prim::F32, "float"),
    ("f64", Prim::F64, "double"),
    ("f16", Prim::F16, "__half"),
    ("bf16", Prim::Bf16, "__nv_bfloat16"),
    ("i8", Prim::I8, "signed char"),
    ("i16", Prim::I16, "short"),
    ("i32", Prim::I32, "int"),
    ("i64", Prim::I64, "long long"),
    ("u8", Prim::U8, "unsigned char"),
    ("u16", Prim::U16, "unsigned short"),
    ("u32", Prim::U32, "unsigned int"),
    ("u64", Prim::U64, "unsigned long long"),
    ("usize", Prim::Usize, "k_usize"),
    ("isize", Prim::Isize, "k_isize"),
    ("bool", Prim::Bool, "bool"),
];

impl Prim {
    pub(crate) fn from_name(name: &str) -> Option<Prim> {
        PRIMS.iter().find(|p| p.0 == name).map(|p| p.1)
    }
    pub(crate) fn cuda(self) -> &'static str {
        PRIMS.iter().find(|p| p.1 == self).map(|p| p.2).unwrap_or("?")
    }
    pub(crate) fn rust(self) -> &'static str {
        PRIMS.iter().find(|p| p.1 == self).map(|p| p.0).unwrap_or("?")
    }
    pub(crate) fn is_float(self) -> bool {
        matches!(self, Prim::F32 | Prim::F64 | Prim::F16 | Prim::Bf16)
    }
    pub(crate) fn is_half(self) -> bool {
        matches!(self, Prim::F16 | Prim::Bf16)
    }
}

/// The bound of a generic parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bound {
    Float,
    Int,
}

impl Bound {
    /// The dtypes `precompile_all` instantiates for this bound.
    pub(crate) fn dtypes(self) -> &'static [&'static str] {
        match self {
            Bound::Float => &["f32", "f64", "f16", "bf16"],
            Bound::Int => &["i32", "i64", "u32", "u64"],
        }
    }
}

/// A value's type in the body.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Ty {
    Prim(Prim),
    /// A generic parameter (`T`), a `typedef` in the generated source.
    Generic(String, Bound),
    /// A buffer parameter; the C++ name of its length is `<name>_len`.
    Slice {
        elem: Box<Ty>,
        mutable: bool,
    },
    /// A block-shared array of `n` elements.
    Shared {
        elem: Box<Ty>,
        n: String,
    },
    /// A `#[derive(KernelArg)]` struct.
    Struct(String),
    /// A buffer seen as rows (`x.rows(ld)`); the C++ names of its length and stride are
    /// `<name>_len` and `<name>_ld`.
    Rows {
        elem: Box<Ty>,
        mutable: bool,
    },
    /// `Vec2<elem>` / `Vec4<elem>`: lanes loaded or stored as one access.
    Vector(Box<Ty>, usize),
    /// An integer literal whose type its context decides.
    IntLit,
    /// A value whose type its uses decide (see `flex`): an index intrinsic's, or a `let`
    /// of an untyped literal. The flag says a float literal's.
    Flex(usize, bool),
    /// A float literal whose type its context decides.
    FloatLit,
    /// A value whose type only C++ knows (a struct field): the C++ text of the
    /// expression, for `decltype`.
    Unknown(String),
    /// No value.
    Unit,
}

impl Ty {
    /// The C++ spelling of a value type; `None` for buffers, literals and unit.
    pub(crate) fn cuda(&self) -> Option<String> {
        match self {
            Ty::Prim(p) => Some(p.cuda().to_string()),
            Ty::Generic(n, _) | Ty::Struct(n) => Some(n.clone()),
            Ty::Unknown(text) => Some(format!("k_rr<decltype(({text}))>::type")),
            Ty::Flex(id, _) => Some(flex_placeholder(*id)),
            Ty::Vector(e, lanes) => e.cuda().map(|e| format!("k_vec{lanes}<{e}>")),
            _ => None,
        }
    }
    pub(crate) fn is_float(&self) -> bool {
        matches!(self, Ty::Prim(p) if p.is_float())
            || matches!(self, Ty::Generic(_, Bound::Float) | Ty::FloatLit | Ty::Flex(_, true))
    }
    pub(crate) fn is_int(&self) -> bool {
        matches!(self, Ty::Prim(p) if !p.is_float() && *p != Prim::Bool)
            || matches!(self, Ty::Generic(_, Bound::Int) | Ty::IntLit | Ty::Flex(_, false))
    }
    pub(crate) fn is_literal(&self) -> bool {
        matches!(self, Ty::IntLit | Ty::FloatLit)
    }
    /// The type of an expression whose error was reported: a value of unknown C++ type
    /// that raises no further errors where it is used.
    pub(crate) fn reported() -> Ty {
        Ty::Unknown("0".into())
    }
    /// True for [`Ty::reported`]'s type (its uses stay silent).
    pub(crate) fn is_reported(&self) -> bool {
        matches!(self, Ty::Unknown(t) if t == "0")
    }
    /// A value type the literal can take on (`Prim`, `Generic`, `Unknown`, `Flex`).
    pub(crate) fn is_value(&self) -> bool {
        matches!(self, Ty::Prim(_) | Ty::Generic(..) | Ty::Unknown(_) | Ty::Flex(..))
    }
}

/// The C++ placeholder for flex variable `id`'s type, filled in when the walk is over
/// (see `flex`).
pub(crate) fn flex_placeholder(id: usize) -> String {
    format!("@FLEX{id}@")
}
