//! `Vec2` / `Vec4` in a kernel body: the vector types, their loads and stores, their
//! constructors and lanes — one table, so each kind is spelled once.

use super::{Out, Tr};
use crate::kernel::signature::scalar_type;
use crate::kernel::types::{Prim, Ty};

/// One vector type.
pub(super) struct Kind {
    /// The Rust name.
    name: &'static str,
    lanes: usize,
    /// Its lanes' names, in order.
    fields: &'static [&'static str],
    /// The buffer methods that load and store it.
    load: &'static str,
    store: &'static str,
}

const KINDS: &[Kind] = &[
    Kind {
        name: "Vec2",
        lanes: 2,
        fields: &["x", "y"],
        load: "load2",
        store: "store2",
    },
    Kind {
        name: "Vec4",
        lanes: 4,
        fields: &["x", "y", "z", "w"],
        load: "load4",
        store: "store4",
    },
];

/// The vector type named `name`.
pub(super) fn kind_named(name: &str) -> Option<&'static Kind> {
    KINDS.iter().find(|k| k.name == name)
}

/// The vector type a buffer method loads or stores, and whether it stores.
pub(super) fn access_named(method: &str) -> Option<(&'static Kind, bool)> {
    KINDS.iter().find_map(|k| {
        if method == k.load {
            Some((k, false))
        } else if method == k.store {
            Some((k, true))
        } else {
            None
        }
    })
}

fn kind_of(lanes: usize) -> &'static Kind {
    KINDS
        .iter()
        .find(|k| k.lanes == lanes)
        .expect("a vector of a known width")
}

impl Tr<'_> {
    /// `Vec4<T>` written in a `let` annotation, if `t` is one.
    pub(super) fn vector_type(&self, t: &syn::Type) -> Option<Ty> {
        let syn::Type::Path(p) = t else { return None };
        let seg = p.path.segments.last()?;
        let kind = kind_named(&seg.ident.to_string())?;
        let syn::PathArguments::AngleBracketed(a) = &seg.arguments else {
            return None;
        };
        match a.args.iter().collect::<Vec<_>>().as_slice() {
            [syn::GenericArgument::Type(e)] => scalar_type(e, &self.generics)
                .filter(|e| *e != Ty::Prim(Prim::Bool))
                .map(|e| Ty::Vector(Box::new(e), kind.lanes)),
            _ => None,
        }
    }

    /// A lane of a vector (`v.x`).
    pub(super) fn vector_field(&mut self, field: &syn::Ident, base: &str, elem: &Ty, lanes: usize) -> Out {
        let kind = kind_of(lanes);
        if kind.fields.contains(&field.to_string().as_str()) {
            return (format!("{base}.{field}"), elem.clone());
        }
        self.err(
            field,
            format!("a `{}`'s elements are `{}`", kind.name, kind.fields.join("`, `")),
        )
    }

    /// `x.load4(i)` (elements `4i .. 4i + 4` as one `Vec4`) and `y.store4(i, v)`, and
    /// the same for `Vec2`.
    pub(super) fn vector_access(
        &mut self,
        m: &syn::ExprMethodCall,
        kind: &Kind,
        store: bool,
        cname: &str,
        elem: &Ty,
        mutable: bool,
    ) -> Out {
        let (name, lanes) = (kind.name, kind.lanes);
        let vec = Ty::Vector(Box::new(elem.clone()), lanes);
        self.note_type(&vec);
        if !store {
            if m.args.len() != 1 {
                return self.err(
                    &m.method,
                    format!(
                        "`{}(i)` takes the vector's index (elements `{lanes}i .. {lanes}i + {lanes}`)",
                        kind.load
                    ),
                );
            }
            let (i, _) = self.expr(&m.args[0], None);
            return (format!("k_load{lanes}({cname}, {i})"), vec);
        }
        if !mutable {
            return self.err(
                &m.receiver,
                format!("`{}` writes: take the buffer as `&mut [T]`", kind.store),
            );
        }
        if m.args.len() != 2 {
            return self.err(
                &m.method,
                format!("`{}(i, v)` takes the vector's index and a `{name}`", kind.store),
            );
        }
        let (i, _) = self.expr(&m.args[0], None);
        let (v, vt) = self.expr(&m.args[1], Some(&vec));
        if !matches!(vt, Ty::Vector(_, l) if l == lanes) && !matches!(vt, Ty::Unknown(_)) {
            return self.err(
                &m.args[1],
                format!(
                    "`{}` stores a `{name}` (`{name}::new(…)`, `{name}::splat(a)` or a `{}`)",
                    kind.store, kind.load
                ),
            );
        }
        (format!("k_store{lanes}({cname}, {i}, {v})"), Ty::Unit)
    }

    /// `Vec4::new(a, b, c, d)` and `Vec4::splat(a)` (and `Vec2`'s): the element type is
    /// the first typed argument's, or the wanted vector's.
    pub(super) fn vector_constructor(
        &mut self,
        c: &syn::ExprCall,
        kind: &Kind,
        f: &syn::Ident,
        expected: Option<&Ty>,
    ) -> Out {
        let (name, lanes) = (kind.name, kind.lanes);
        let arity = match f.to_string().as_str() {
            "new" => lanes,
            "splat" => 1,
            _ => {
                return self.err(
                    f,
                    format!(
                        "a `{name}` is made with `{name}::new({})` or `{name}::splat(v)`",
                        kind.fields.join(", ")
                    ),
                )
            }
        };
        if c.args.len() != arity {
            return self.err(c, format!("`{name}::{f}` takes {arity} element(s)"));
        }
        let mut elem = match expected {
            Some(Ty::Vector(e, l)) if *l == lanes => Some((**e).clone()),
            _ => None,
        };
        let mut parts = vec![];
        for a in &c.args {
            let (t, ty) = self.expr(a, elem.as_ref());
            if elem.is_none() && ty.is_value() {
                elem = Some(ty);
            }
            parts.push(t);
        }
        let Some(elem) = elem else {
            return self.err(
                c,
                format!("give a `{name}`'s elements a type (`{name}::splat(0.0f32)`, `{name}::splat(T::zero())`)"),
            );
        };
        let cty = elem.cuda().unwrap_or_default();
        let parts: Vec<String> = parts.into_iter().map(|p| format!("(({cty})({p}))")).collect();
        let vec = Ty::Vector(Box::new(elem), lanes);
        self.note_type(&vec);
        // `splat` evaluates its argument once.
        let ctor = if arity == 1 { "splat" } else { "new" };
        (format!("k_vec{lanes}_{ctor}<{cty}>({})", parts.join(", ")), vec)
    }
}
