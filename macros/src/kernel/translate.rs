//! Validate + translate: a kernel body, in the Rust subset, to CUDA C++.
//!
//! One walk over the body does both: every construct either has a translation or is a
//! compile error at its span with a hint (never a silent miscompile), so the checker and
//! the translator cannot disagree about what the subset is. Types are tracked just far
//! enough to type literals the way rustc does (a literal takes the type of the value it
//! meets), declare `let`s with their C++ type and pick operators. Every statement is
//! preceded by a `#line` marker so NVRTC errors point at the Rust source.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write;

use proc_macro2::Span;
use syn::spanned::Spanned;

use super::flex::FlexInts;
use super::intrinsics::*;
use super::signature::{scalar_type, ParamKind, Signature};
use super::types::{Bound, Prim, Ty};
use crate::errors::Errors;

mod vectors;

/// The translation of a body.
pub(crate) struct Translation {
    /// The statements of the kernel function, C++.
    pub(crate) body: String,
    /// Concrete half types used (`"Fp16"`, `"Bf16"`), for headers.
    pub(crate) headers: Vec<&'static str>,
    /// The index intrinsic calls (by address in the block) whose use made them an integer
    /// type other than `usize`: the CPU body casts them the same way.
    pub(crate) casts: HashMap<usize, Prim>,
    /// The `#[device] fn`s the body calls, by the path it calls them with (once each).
    pub(crate) calls: Vec<syn::Path>,
    /// Index values passed to a `#[device] fn` (by address in the block): the CPU body
    /// converts each to the parameter's type.
    pub(crate) converts: HashSet<usize>,
    /// `#[derive(KernelArg)]` structs the body builds or declares (their C++ declaration
    /// must be in the source).
    pub(crate) structs: Vec<syn::Path>,
}

struct Var {
    cname: String,
    ty: Ty,
}

struct Tr<'a> {
    errors: &'a mut Errors,
    generics: BTreeMap<String, Bound>,
    scopes: Vec<HashMap<String, Var>>,
    used_names: HashMap<String, usize>,
    out: String,
    indent: usize,
    headers: Vec<&'static str>,
    /// `const N: usize = 16;` items of the body with an integer literal value: what a
    /// shared array's length may name.
    consts: HashMap<String, usize>,
    /// The integer types of index intrinsic values.
    flex: FlexInts,
    /// Device functions called, once each.
    calls: Vec<syn::Path>,
    /// Index values passed to device functions.
    converts: HashSet<usize>,
    /// Structs the body builds or declares.
    structs: Vec<syn::Path>,
    /// Whether the `extern __shared__` bytes of `dyn_shared` are declared.
    dyn_smem: bool,
    /// The names of the body's `const` items and const generics (a pattern naming one
    /// compares with it).
    const_names: HashSet<String>,
    /// Const generic parameters: what a shared array's length may name besides literals.
    generic_consts: HashSet<String>,
    /// The function's own name and, for a `#[device] fn`, its return type.
    name: String,
    ret: Option<Ty>,
}

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

type Out = (String, Ty);

fn unit() -> Out {
    (String::new(), Ty::Unit)
}

fn line_of(span: Span) -> Option<(usize, String)> {
    let line = span.start().line;
    if line == 0 {
        return None;
    }
    Some((line, span.file()))
}

pub(crate) fn translate(sig: &Signature, block: &syn::Block, errors: &mut Errors) -> Translation {
    let mut tr = Tr {
        errors,
        generics: sig.generic_map(),
        scopes: vec![HashMap::new()],
        used_names: HashMap::new(),
        out: String::new(),
        indent: 1,
        headers: vec![],
        consts: HashMap::new(),
        flex: FlexInts::default(),
        calls: vec![],
        converts: HashSet::new(),
        structs: vec![],
        dyn_smem: false,
        const_names: HashSet::new(),
        generic_consts: HashSet::new(),
        name: sig.name.to_string(),
        ret: sig.ret.clone(),
    };
    // Const generics: values of the instantiation, `static const` in its source.
    for (ident, prim, _) in &sig.consts {
        let name = ident.to_string();
        tr.const_names.insert(name.clone());
        tr.generic_consts.insert(name.clone());
        let cname = tr.fresh(&name);
        tr.scopes[0].insert(
            name,
            Var {
                cname,
                ty: Ty::Prim(*prim),
            },
        );
    }
    for p in &sig.params {
        let name = p.name.to_string();
        let ty = match &p.kind {
            ParamKind::Scalar(t) => t.clone(),
            ParamKind::Slice { elem, mutable } => Ty::Slice {
                elem: Box::new(elem.clone()),
                mutable: *mutable,
            },
            ParamKind::Struct(path) => {
                Ty::Struct(path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default())
            }
        };
        tr.note_type(&ty);
        let cname = tr.fresh(&name);
        tr.scopes[0].insert(name, Var { cname, ty });
    }
    tr.body(block);
    Translation {
        body: tr.flex.fill(&tr.out),
        headers: tr.headers,
        casts: tr.flex.casts(),
        calls: tr.calls,
        converts: tr.converts,
        structs: tr.structs,
    }
}

/// The C++ parameter list of a signature (shared with the raw-CUDA check).
pub(crate) fn cuda_params(sig: &Signature) -> Vec<(String, String)> {
    let mut v = vec![];
    for p in &sig.params {
        let n = param_cname(&p.name.to_string());
        match &p.kind {
            ParamKind::Scalar(t) => v.push((t.cuda().unwrap_or_default(), n)),
            ParamKind::Slice { elem, mutable } => {
                let e = elem.cuda().unwrap_or_default();
                if *mutable {
                    v.push((format!("{e}*"), n.clone()));
                } else {
                    v.push((format!("const {e}*"), n.clone()));
                }
                v.push(("unsigned long long".into(), format!("{n}_len")));
            }
            ParamKind::Struct(path) => {
                v.push((path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default(), n))
            }
        }
    }
    v
}

/// A parameter's C++ name (keywords get a suffix).
/// True for a name the generated CUDA C++ cannot use as is: a C++ keyword or reserved
/// name, our prelude's `k_` prefix, or a leading `__`.
pub(crate) fn reserved(name: &str) -> bool {
    RESERVED.contains(&name) || name.starts_with("k_") || name.starts_with("__")
}

pub(crate) fn param_cname(name: &str) -> String {
    if reserved(name) {
        format!("{name}_")
    } else {
        name.to_string()
    }
}

impl Tr<'_> {
    fn err(&mut self, at: impl Spanned, msg: impl std::fmt::Display) -> Out {
        self.errors.push(syn::Error::new(at.span(), msg));
        // An unknown type raises no further errors where the value is used.
        (String::from("0"), Ty::Unknown("0".into()))
    }

    /// The function's statements; a `#[device] fn`'s trailing expression is its value.
    fn body(&mut self, block: &syn::Block) {
        let returns = self.ret.as_ref().is_some_and(|t| *t != Ty::Unit);
        match block.stmts.split_last() {
            Some((syn::Stmt::Expr(tail, None), rest)) if returns && !is_statement_like(tail) => {
                self.stmts(rest, true);
                self.line(tail.span());
                let ret = self.ret.clone();
                let (v, _) = self.expr(tail, ret.as_ref());
                self.emit(&format!("return {v};"));
            }
            _ => self.stmts(&block.stmts, true),
        }
    }

    fn note_type(&mut self, ty: &Ty) {
        let h = match ty {
            Ty::Prim(Prim::F16) => "Fp16",
            Ty::Prim(Prim::Bf16) => "Bf16",
            Ty::Slice { elem, .. } | Ty::Shared { elem, .. } | Ty::Vector(elem, _) => {
                return self.note_type(&elem.clone())
            }
            _ => return,
        };
        if !self.headers.contains(&h) {
            self.headers.push(h);
        }
    }

    /// A C++ name for a new Rust binding: unique in the function (C++ forbids the
    /// redeclarations Rust's shadowing produces).
    fn fresh(&mut self, name: &str) -> String {
        let base = param_cname(name);
        let n = self.used_names.entry(base.clone()).or_insert(0);
        *n += 1;
        if *n == 1 {
            base
        } else {
            format!("{base}__{n}")
        }
    }

    fn lookup(&self, name: &str) -> Option<&Var> {
        self.scopes.iter().rev().find_map(|s| s.get(name))
    }

    fn line(&mut self, span: Span) {
        if let Some((line, file)) = line_of(span) {
            let _ = writeln!(
                self.out,
                "#line {line} \"{}\"",
                file.replace('\\', "/").replace('"', "'")
            );
        }
    }

    fn emit(&mut self, text: &str) {
        for _ in 0..self.indent {
            self.out.push_str("  ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    fn stmts(&mut self, stmts: &[syn::Stmt], top: bool) {
        for s in stmts {
            self.line(s.span());
            match s {
                syn::Stmt::Local(l) => self.local(l, top),
                syn::Stmt::Expr(e, _) => self.stmt_expr(e),
                syn::Stmt::Item(syn::Item::Const(c)) => self.const_item(c),
                syn::Stmt::Item(i) => {
                    self.err(i, "items (fn, struct, use …) cannot be declared inside a #[kernel]; declare them outside (a constant can be a `const` item in the body, or a parameter)");
                }
                syn::Stmt::Macro(m) => {
                    let name = m
                        .mac
                        .path
                        .segments
                        .last()
                        .map(|s| s.ident.to_string())
                        .unwrap_or_default();
                    self.err(&m.mac.path, format!("macros (`{name}!`) are not supported in a #[kernel]: a GPU kernel cannot print, format or panic; compute into an output buffer instead"));
                }
            }
        }
    }

    fn scoped_block(&mut self, b: &syn::Block) {
        self.scopes.push(HashMap::new());
        self.indent += 1;
        self.stmts(&b.stmts, false);
        self.indent -= 1;
        self.scopes.pop();
    }

    fn local(&mut self, l: &syn::Local, top: bool) {
        if self.tuple_local(l) {
            return;
        }
        let (ident, annotated) = match &l.pat {
            syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => (pi.ident.clone(), None),
            syn::Pat::Type(pt) => match &*pt.pat {
                syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => (pi.ident.clone(), Some(&*pt.ty)),
                other => return self.bad_pattern(other),
            },
            other => return self.bad_pattern(other),
        };
        let name = ident.to_string();
        let mutable = matches!(&l.pat, syn::Pat::Ident(pi) if pi.mutability.is_some())
            || matches!(&l.pat, syn::Pat::Type(pt) if matches!(&*pt.pat, syn::Pat::Ident(pi) if pi.mutability.is_some()));
        if let Some(init) = &l.init {
            if let Some((_, diverge)) = &init.diverge {
                self.err(diverge, "`let … else` is not supported in a #[kernel]; use `if`");
                return;
            }
            if let Some(view) = self.rows_decl(&init.expr) {
                let Some((elem, mutable, base, ld)) = view else { return };
                let cname = self.fresh(&name);
                let cty = elem.cuda().unwrap_or_default();
                let konst = if mutable { "" } else { "const " };
                self.emit(&format!("{konst}{cty}* const {cname} = {base};"));
                self.emit(&format!("const k_usize {cname}_len = {base}_len;"));
                self.emit(&format!("const k_usize {cname}_ld = {ld};"));
                self.declare(
                    name,
                    cname,
                    Ty::Rows {
                        elem: Box::new(elem),
                        mutable,
                    },
                );
                return;
            }
            if let Some(dynamic) = self.dyn_shared_decl(&init.expr) {
                let Some(elem) = dynamic else { return };
                if !top || self.ret.is_some() {
                    self.err(&l.pat, "declare `dyn_shared` at the top level of a #[kernel] body (one view per block), not inside a loop, branch or #[device] fn");
                    return;
                }
                self.note_type(&elem);
                if !self.dyn_smem {
                    self.dyn_smem = true;
                    self.emit("extern __shared__ __align__(16) unsigned char k_dyn_smem[];");
                }
                let cname = self.fresh(&name);
                let cty = elem.cuda().unwrap_or_default();
                self.emit(&format!("{cty}* const {cname} = reinterpret_cast<{cty}*>(k_dyn_smem);"));
                self.emit(&format!(
                    "const k_usize {cname}_len = k_dyn_smem_size() / sizeof({cty});"
                ));
                self.declare(
                    name,
                    cname,
                    Ty::Slice {
                        elem: Box::new(elem),
                        mutable: true,
                    },
                );
                return;
            }
            if let Some(shared) = self.shared_decl(&init.expr) {
                let Some((elem, n)) = shared else { return };
                if self.ret.is_some() {
                    self.err(&l.pat, "a #[device] fn cannot declare shared arrays (CUDA would share one array between all its calls); declare it in the kernel");
                    return;
                }
                if !top {
                    self.err(&l.pat, "declare shared arrays at the top level of the kernel body (CUDA allocates them once per block), not inside a loop or branch");
                    return;
                }
                self.note_type(&elem);
                let cname = self.fresh(&name);
                self.emit(&format!("__shared__ {} {cname}[{n}];", elem.cuda().unwrap_or_default()));
                self.declare(
                    name,
                    cname,
                    Ty::Shared {
                        elem: Box::new(elem),
                        n,
                    },
                );
                return;
            }
        }
        let declared = match annotated {
            Some(t) => match scalar_type(t, &self.generics)
                .or_else(|| self.vector_type(t))
                .or_else(|| self.struct_type(t))
            {
                Some(ty) => Some(ty),
                None => {
                    self.err(t, "a `let` in a #[kernel] holds a scalar, a `Vec2`/`Vec4` or a struct: annotate it with f32 f64 f16 bf16 i8 … u64 usize isize bool, a generic parameter, `Vec4<T>` or a `#[derive(KernelArg)]` struct");
                    return;
                }
            },
            None => None,
        };
        let init = l.init.as_ref().map(|i| self.expr(&i.expr, declared.as_ref()));
        let ty = match (&declared, &init) {
            (Some(t), _) => t.clone(),
            (None, Some((_, t))) => t.clone(),
            (None, None) => {
                self.err(&l.pat, format!("give `{name}` a type (`let {name}: f32;`): a #[kernel] declares every variable with its C++ type"));
                return;
            }
        };
        // An untyped literal: typed by its uses, as rustc types it (see `flex`).
        let ty = match ty {
            Ty::IntLit => self.flex.literal(false),
            Ty::FloatLit => self.flex.literal(true),
            t => t,
        };
        let cty = match &ty {
            Ty::Unknown(_) => "auto".to_string(),
            Ty::Unit | Ty::Slice { .. } | Ty::Shared { .. } | Ty::Rows { .. } => {
                self.err(&l.pat, format!("`{name}` must hold a scalar; buffers and shared arrays cannot be rebound (index them directly)"));
                return;
            }
            t => t.cuda().unwrap_or_default(),
        };
        self.note_type(&ty);
        let cname = self.fresh(&name);
        let konst = if mutable { "" } else { "const " };
        match init {
            Some((text, _)) => self.emit(&format!("{konst}{cty} {cname} = {text};")),
            None => self.emit(&format!("{cty} {cname};")),
        }
        self.declare(name, cname, ty);
    }

    /// `let (a, mut b) = (x, y);` (optionally `: (f32, u32)`): every value is computed
    /// before any name is bound, as in Rust (`let (a, b) = (b, a);` swaps), then one C++
    /// variable per name. False if `l` is not a tuple `let`.
    fn tuple_local(&mut self, l: &syn::Local) -> bool {
        let (pat, annotated) = match &l.pat {
            syn::Pat::Tuple(t) => (t, None),
            syn::Pat::Type(pt) => match &*pt.pat {
                syn::Pat::Tuple(t) => (t, Some(&*pt.ty)),
                _ => return false,
            },
            _ => return false,
        };
        let hint = "a tuple `let` binds plain names to a tuple of values: `let (a, b) = (x, y);`";
        let Some(syn::Expr::Tuple(values)) = l.init.as_ref().map(|i| strip_parens(&i.expr)) else {
            self.err(&l.pat, hint);
            return true;
        };
        let mut names = vec![];
        for p in &pat.elems {
            match p {
                syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                    names.push((pi.ident.to_string(), pi.mutability.is_some()))
                }
                other => {
                    self.err(other, hint);
                    return true;
                }
            }
        }
        if names.len() != values.elems.len() {
            self.err(
                values,
                format!(
                    "this tuple `let` binds {} names to {} values: give one value per name",
                    names.len(),
                    values.elems.len()
                ),
            );
            return true;
        }
        let types: Vec<Option<Ty>> = match annotated {
            None => vec![None; names.len()],
            Some(syn::Type::Tuple(t)) if t.elems.len() == names.len() => {
                let mut v = vec![];
                for e in &t.elems {
                    match scalar_type(e, &self.generics) {
                        Some(ty) => v.push(Some(ty)),
                        None => {
                            self.err(e, "a tuple `let` holds scalars");
                            return true;
                        }
                    }
                }
                v
            }
            Some(other) => {
                self.err(
                    other,
                    "annotate a tuple `let` with a tuple of as many scalar types: `(f32, u32)`",
                );
                return true;
            }
        };
        let mut computed = vec![];
        for (v, t) in values.elems.iter().zip(&types) {
            let (text, ty) = self.expr(v, t.as_ref());
            let ty = match (t, ty) {
                (Some(t), _) => t.clone(),
                (None, Ty::IntLit) => self.flex.literal(false),
                (None, Ty::FloatLit) => self.flex.literal(true),
                (None, ty) if ty.is_value() => ty,
                (None, _) => {
                    self.err(v, "a tuple `let` holds scalars");
                    return true;
                }
            };
            computed.push((text, ty));
        }
        for ((name, mutable), (text, ty)) in names.into_iter().zip(computed) {
            self.note_type(&ty);
            let cname = self.fresh(&name);
            let cty = match &ty {
                Ty::Unknown(_) => "auto".to_string(),
                t => t.cuda().unwrap_or_default(),
            };
            let konst = if mutable { "" } else { "const " };
            self.emit(&format!("{konst}{cty} {cname} = {text};"));
            self.declare(name, cname, ty);
        }
        true
    }

    /// Reports a destructuring `let`, and declares the names it binds (of unknown type)
    /// so their uses raise no further errors.
    fn bad_pattern(&mut self, p: &syn::Pat) {
        self.err(
            p,
            "bind one plain name per `let` in a #[kernel], or a tuple of names to a tuple of values (no struct patterns)",
        );
        let mut names = vec![];
        pattern_names(p, &mut names);
        for n in names {
            self.declare(n.clone(), n.clone(), Ty::Unknown(n));
        }
    }

    /// `const TILE: usize = 16;` in the body: a C++ `const` of the same type, usable in
    /// expressions, loops and — when its value is an integer literal — shared array lengths.
    fn const_item(&mut self, c: &syn::ItemConst) {
        if !c.generics.params.is_empty() {
            self.err(&c.generics, "a `const` item in a #[kernel] takes no generic parameters");
            return;
        }
        let Some(ty) = scalar_type(&c.ty, &self.generics).filter(|t| matches!(t, Ty::Prim(_))) else {
            self.err(
                &c.ty,
                "a `const` in a #[kernel] has a primitive number type (usize, u32, i32, f32 …) or bool",
            );
            return;
        };
        let (v, _) = self.expr(&c.expr, Some(&ty));
        let name = c.ident.to_string();
        if let syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(i), ..
        }) = &*c.expr
        {
            if let Ok(n) = i.base10_parse::<usize>() {
                self.consts.insert(name.clone(), n);
            }
        }
        let cname = self.fresh(&name);
        self.const_names.insert(name.clone());
        self.emit(&format!("const {} {cname} = {v};", ty.cuda().unwrap_or_default()));
        self.declare(name, cname, ty);
    }

    fn declare(&mut self, name: String, cname: String, ty: Ty) {
        self.scopes.last_mut().expect("a scope").insert(name, Var { cname, ty });
    }

    /// `x.rows(ld)` on a buffer: `Some(Some((elem, mutable, buffer's C++ name, stride)))`,
    /// `Some(None)` if malformed (reported), `None` if the expression is something else.
    #[allow(clippy::type_complexity)]
    fn rows_decl(&mut self, e: &syn::Expr) -> Option<Option<(Ty, bool, String, String)>> {
        let syn::Expr::MethodCall(m) = e else { return None };
        if m.method != "rows" {
            return None;
        }
        let syn::Expr::Path(p) = strip_parens(&m.receiver) else {
            return None;
        };
        let v = self.lookup(&p.path.get_ident()?.to_string())?;
        let (cname, ty) = (v.cname.clone(), v.ty.clone());
        let Ty::Slice { elem, mutable } = ty else {
            self.err(
                &m.receiver,
                "`rows(ld)` views a buffer parameter (or `dyn_shared`) as a matrix",
            );
            return Some(None);
        };
        if m.args.len() != 1 {
            self.err(&m.method, "`rows(ld)` takes the row stride in elements");
            return Some(None);
        }
        let (ld, _) = self.expr(&m.args[0], None);
        Some(Some((*elem, mutable, cname, ld)))
    }

    /// `dyn_shared::<T>()`: `Some(Some(T))`, `Some(None)` if malformed (reported), `None`
    /// if the expression is something else.
    fn dyn_shared_decl(&mut self, e: &syn::Expr) -> Option<Option<Ty>> {
        let syn::Expr::Call(c) = e else { return None };
        let syn::Expr::Path(p) = &*c.func else { return None };
        let last = p.path.segments.last()?;
        if last.ident != "dyn_shared" {
            return None;
        }
        let elem = match &last.arguments {
            syn::PathArguments::AngleBracketed(a) if c.args.is_empty() => {
                match a.args.iter().collect::<Vec<_>>().as_slice() {
                    [syn::GenericArgument::Type(t)] => {
                        scalar_type(t, &self.generics).filter(|t| t != &Ty::Prim(Prim::Bool))
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        if elem.is_none() {
            self.err(e, "write dynamic shared memory as `let mut buf = dyn_shared::<T>();` (its length is the launch's `shared_mem_bytes` / size of T)");
        }
        Some(elem)
    }

    /// `shared_array::<T, N>()`: `Some(Some((T, N)))`, `Some(None)` if malformed
    /// (reported), `None` if the expression is something else.
    fn shared_decl(&mut self, e: &syn::Expr) -> Option<Option<(Ty, String)>> {
        let syn::Expr::Call(c) = e else { return None };
        let syn::Expr::Path(p) = &*c.func else { return None };
        let last = p.path.segments.last()?;
        if last.ident != "shared_array" {
            return None;
        }
        let hint = "write shared arrays as `let mut tile = shared_array::<T, 256>();` (a dtype and a literal length, \
                    a `const` of the body with one, or a const generic)";
        let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
            self.err(last, hint);
            return Some(None);
        };
        let args: Vec<_> = args.args.iter().collect();
        let parsed = match args.as_slice() {
            [syn::GenericArgument::Type(t), n] => {
                let n = match n {
                    syn::GenericArgument::Const(syn::Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Int(i), ..
                    })) => i.base10_parse::<usize>().ok().map(|n| n.to_string()),
                    // A `const` of the body with a literal value, or a const generic.
                    syn::GenericArgument::Type(syn::Type::Path(p)) => p.path.get_ident().and_then(|id| {
                        let name = id.to_string();
                        match self.consts.get(&name) {
                            Some(n) => Some(n.to_string()),
                            None if self.generic_consts.contains(&name) => Some(param_cname(&name)),
                            None => None,
                        }
                    }),
                    _ => None,
                };
                scalar_type(t, &self.generics)
                    .filter(|t| t != &Ty::Prim(Prim::Bool))
                    .zip(n)
            }
            _ => None,
        };
        match parsed {
            Some((t, n)) if c.args.is_empty() => Some(Some((t, n))),
            _ => {
                self.err(e, hint);
                Some(None)
            }
        }
    }

    fn stmt_expr(&mut self, e: &syn::Expr) {
        match e {
            syn::Expr::If(i) => self.if_stmt(i),
            syn::Expr::Match(m) => self.match_stmt(m),
            syn::Expr::While(w) => {
                if let Some(l) = &w.label {
                    self.err(
                        l,
                        "loop labels are not supported in a #[kernel]; restructure with a flag",
                    );
                    return;
                }
                if let syn::Expr::Let(l) = &*w.cond {
                    self.err(
                        l,
                        "`while let` is not supported in a #[kernel]; use `while` with a condition",
                    );
                    return;
                }
                let (c, _) = self.expr(&w.cond, Some(&Ty::Prim(Prim::Bool)));
                self.emit(&format!("while ({c}) {{"));
                self.scoped_block(&w.body);
                self.emit("}");
            }
            syn::Expr::Loop(l) => {
                if let Some(lb) = &l.label {
                    self.err(
                        lb,
                        "loop labels are not supported in a #[kernel]; restructure with a flag",
                    );
                    return;
                }
                self.emit("while (true) {");
                self.scoped_block(&l.body);
                self.emit("}");
            }
            syn::Expr::ForLoop(f) => self.for_loop(f),
            syn::Expr::Block(b) => {
                if b.label.is_some() {
                    self.err(b, "block labels are not supported in a #[kernel]");
                    return;
                }
                self.emit("{");
                self.scoped_block(&b.block);
                self.emit("}");
            }
            syn::Expr::Break(b) => {
                if let Some(l) = &b.label {
                    self.err(l, "labelled `break` is not supported in a #[kernel]");
                } else if let Some(v) = &b.expr {
                    self.err(v, "`break` with a value is not supported in a #[kernel]");
                } else {
                    self.emit("break;");
                }
            }
            syn::Expr::Continue(c) => {
                if let Some(l) = &c.label {
                    self.err(l, "labelled `continue` is not supported in a #[kernel]");
                } else {
                    self.emit("continue;");
                }
            }
            syn::Expr::Return(r) => match (&r.expr, self.ret.clone()) {
                (Some(v), Some(t)) if t != Ty::Unit => {
                    let (v, _) = self.expr(v, Some(&t));
                    self.emit(&format!("return {v};"));
                }
                (Some(v), Some(_)) => {
                    self.err(
                        v,
                        "this #[device] fn returns nothing: declare its return type (`-> f32`) or `return;`",
                    );
                }
                (Some(v), None) => {
                    self.err(
                        v,
                        "a #[kernel] returns nothing: write the value into an output buffer and `return;`",
                    );
                }
                (None, Some(t)) if t != Ty::Unit => {
                    self.err(r, "this #[device] fn returns a value: `return value;`");
                }
                (None, _) => self.emit("return;"),
            },
            syn::Expr::Assign(a) => {
                let (l, lt) = self.place(&a.left);
                let (r, _) = self.expr(&a.right, Some(&lt));
                self.emit(&format!("{l} = {r};"));
            }
            syn::Expr::Binary(b) if compound(&b.op).is_some() => {
                let (l, lt) = self.place(&b.left);
                let rhs_expected = if matches!(b.op, syn::BinOp::ShlAssign(_) | syn::BinOp::ShrAssign(_)) {
                    None
                } else {
                    Some(lt.clone())
                };
                let (r, _) = self.expr(&b.right, rhs_expected.as_ref());
                let op = compound(&b.op).expect("checked");
                if op == "%=" && lt.is_float() {
                    self.emit(&format!("{l} = k_rem({l}, {r});"));
                } else {
                    self.emit(&format!("{l} {op} {r};"));
                }
            }
            other => {
                let (text, _) = self.expr(other, None);
                if !text.is_empty() {
                    self.emit(&format!("{text};"));
                }
            }
        }
    }

    /// An assignable place: a local, a buffer element or a shared element.
    fn place(&mut self, e: &syn::Expr) -> Out {
        match strip_parens(e) {
            syn::Expr::Index(ix) => match self.read_only_buffer(&ix.expr) {
                Some(name) => self.err(
                    ix,
                    format!("`{name}` is a read-only buffer (`&[T]`): take it as `&mut [T]` to write it"),
                ),
                None => self.expr(e, None),
            },
            syn::Expr::Path(_) => self.expr(e, None),
            syn::Expr::Field(f) if matches!(strip_parens(&f.base), syn::Expr::Path(_)) => self.expr(e, None),
            other => self.err(other, "assign to a variable or a buffer element (`y[i] = …`)"),
        }
    }

    /// The name of the `&[T]` parameter `e` names, if it names one.
    fn read_only_buffer(&self, e: &syn::Expr) -> Option<String> {
        let syn::Expr::Path(p) = strip_parens(e) else {
            return None;
        };
        let ident = p.path.get_ident()?;
        let read_only = matches!(
            self.lookup(&ident.to_string())?.ty,
            Ty::Slice { mutable: false, .. } | Ty::Rows { mutable: false, .. }
        );
        read_only.then(|| ident.to_string())
    }

    fn if_stmt(&mut self, i: &syn::ExprIf) {
        if let syn::Expr::Let(l) = &*i.cond {
            self.err(l, "`if let` is not supported in a #[kernel]; compare values with `if`");
            return;
        }
        let (c, _) = self.expr(&i.cond, Some(&Ty::Prim(Prim::Bool)));
        self.emit(&format!("if ({c}) {{"));
        self.scoped_block(&i.then_branch);
        match &i.else_branch {
            None => self.emit("}"),
            Some((_, e)) => match &**e {
                syn::Expr::If(inner) => {
                    self.emit("} else {");
                    self.indent += 1;
                    self.if_stmt(inner);
                    self.indent -= 1;
                    self.emit("}");
                }
                syn::Expr::Block(b) => {
                    self.emit("} else {");
                    self.scoped_block(&b.block);
                    self.emit("}");
                }
                other => {
                    self.err(other, "unsupported `else` branch");
                }
            },
        }
    }

    /// The scrutinee of a `match` and the condition of each arm (`None`: always taken).
    /// The scrutinee is repeated in each condition, so it may not hold a call with an
    /// effect (an atomic, a shuffle, a vote).
    fn match_arms<'m>(&mut self, m: &'m syn::ExprMatch) -> Option<Vec<(Option<String>, &'m syn::Arm)>> {
        let tokens = quote::ToTokens::to_token_stream(&m.expr).to_string();
        let effect = ATOMICS
            .iter()
            .map(|a| a.0)
            .chain(SHUFFLES.iter().map(|s| s.0))
            .chain(VOTES.iter().map(|v| v.0))
            .find(|name| {
                tokens
                    .split(|c: char| !c.is_alphanumeric() && c != '_')
                    .any(|t| t == *name)
            });
        if let Some(name) = effect {
            self.err(
                &m.expr,
                format!("bind the scrutinee with `let` first: a #[kernel] `match` evaluates it once per arm, and `{name}` has an effect"),
            );
            return None;
        }
        let (s, st) = self.expr(&m.expr, None);
        let mut arms = vec![];
        for arm in &m.arms {
            let cond = self.pattern_cond(&arm.pat, &s, &st)?;
            let cond = match (&arm.guard, cond) {
                (None, c) => c,
                (Some((_, g)), c) => {
                    let (g, _) = self.expr(g, Some(&Ty::Prim(Prim::Bool)));
                    Some(match c {
                        Some(c) => format!("({c} && {g})"),
                        None => g,
                    })
                }
            };
            let always = cond.is_none();
            arms.push((cond, arm));
            if always {
                break;
            }
        }
        Some(arms)
    }

    /// The condition under which `pat` matches the scrutinee `s` (`None`: always).
    fn pattern_cond(&mut self, pat: &syn::Pat, s: &str, st: &Ty) -> Option<Option<String>> {
        match pat {
            syn::Pat::Wild(_) => Some(None),
            // A `const` of the body (`ADD => …`): Rust compares with it, as here.
            syn::Pat::Ident(i)
                if i.subpat.is_none() && i.by_ref.is_none() && self.const_names.contains(&i.ident.to_string()) =>
            {
                let v = self
                    .lookup(&i.ident.to_string())
                    .map(|v| v.cname.clone())
                    .unwrap_or_default();
                Some(Some(format!("({s} == {v})")))
            }
            // `u32::MAX`, a body const by path.
            syn::Pat::Path(p) => {
                let (v, _) = self.path(p);
                Some(Some(format!("({s} == {v})")))
            }
            syn::Pat::Lit(l) => {
                let (v, _) = self.literal(&l.lit, Some(st));
                Some(Some(format!("({s} == {v})")))
            }
            syn::Pat::Range(r) => {
                let mut parts = vec![];
                if let Some(a) = &r.start {
                    parts.push(format!("{s} >= {}", self.expr(a, Some(st)).0));
                }
                if let Some(b) = &r.end {
                    let op = if matches!(r.limits, syn::RangeLimits::Closed(_)) {
                        "<="
                    } else {
                        "<"
                    };
                    parts.push(format!("{s} {op} {}", self.expr(b, Some(st)).0));
                }
                Some(Some(format!("({})", parts.join(" && "))))
            }
            syn::Pat::Or(o) => {
                let mut conds = vec![];
                for p in &o.cases {
                    match self.pattern_cond(p, s, st)? {
                        Some(c) => conds.push(c),
                        None => return Some(None),
                    }
                }
                Some(Some(format!("({})", conds.join(" || "))))
            }
            syn::Pat::Paren(p) => self.pattern_cond(&p.pat, s, st),
            other => {
                self.err(
                    other,
                    "a #[kernel] `match` takes integer or bool patterns: literals, `const`s of the body, `a | b`, \
                     ranges `a..=b` and `_` (no bindings: use the scrutinee itself)",
                );
                None
            }
        }
    }

    /// `match` as a statement: an `if` / `else if` chain.
    fn match_stmt(&mut self, m: &syn::ExprMatch) {
        let Some(arms) = self.match_arms(m) else { return };
        for (k, (cond, arm)) in arms.iter().enumerate() {
            let open = match (k, cond) {
                (0, Some(c)) => format!("if ({c}) {{"),
                (0, None) => "{".to_string(),
                (_, Some(c)) => format!("}} else if ({c}) {{"),
                (_, None) => "} else {".to_string(),
            };
            self.emit(&open);
            match &*arm.body {
                syn::Expr::Block(b) => self.scoped_block(&b.block),
                body => {
                    self.scopes.push(HashMap::new());
                    self.indent += 1;
                    self.stmt_expr(body);
                    self.indent -= 1;
                    self.scopes.pop();
                }
            }
        }
        if !arms.is_empty() {
            self.emit("}");
        }
    }

    /// `match` as a value: nested conditionals, ending with an arm taken always.
    fn match_value(&mut self, m: &syn::ExprMatch, expected: Option<&Ty>) -> Out {
        let Some(arms) = self.match_arms(m) else {
            return unit();
        };
        if !matches!(arms.last(), Some((None, _))) {
            return self.err(
                m,
                "a `match` used as a value in a #[kernel] ends with an arm that always matches (`_ =>`)",
            );
        }
        let mut ty = expected.cloned();
        let mut values = vec![];
        for (cond, arm) in &arms {
            let body = match &*arm.body {
                syn::Expr::Block(b) => match b.block.stmts.as_slice() {
                    [syn::Stmt::Expr(e, None)] => e.clone(),
                    _ => return self.err(&arm.body, "each arm of a `match` used as a value is one expression"),
                },
                e => e.clone(),
            };
            let (v, t) = self.expr(&body, ty.as_ref());
            if ty.as_ref().is_none_or(|t| !t.is_value()) && !is_untyped_literal(&body) {
                ty = Some(t);
            }
            values.push((cond.clone(), v));
        }
        let (_, last) = values.pop().expect("an always-taken arm");
        let text = values.into_iter().rev().fold(last, |acc, (c, v)| {
            format!("({} ? {v} : {acc})", c.expect("only the last arm is always taken"))
        });
        (text, ty.unwrap_or(Ty::Prim(Prim::I32)))
    }

    fn for_loop(&mut self, f: &syn::ExprForLoop) {
        if let Some(l) = &f.label {
            self.err(
                l,
                "loop labels are not supported in a #[kernel]; restructure with a flag",
            );
            return;
        }
        let syn::Pat::Ident(pi) = &*f.pat else {
            self.err(&f.pat, "a #[kernel] `for` binds one name: `for i in 0..n`");
            return;
        };
        let hint = "a #[kernel] `for` loops over a range: `for i in a..b`, `a..=b` or `(a..b).step_by(s)`";
        let (range, step) = match &*f.expr {
            syn::Expr::Range(r) => (r, None),
            syn::Expr::MethodCall(m) if m.method == "step_by" && m.args.len() == 1 => match strip_parens(&m.receiver) {
                syn::Expr::Range(r) => (r, Some(&m.args[0])),
                _ => {
                    self.err(&f.expr, hint);
                    return;
                }
            },
            other => {
                self.err(other, hint);
                return;
            }
        };
        let (Some(start), Some(end)) = (&range.start, &range.end) else {
            self.err(range, "a #[kernel] `for` needs both ends of its range: `a..b`");
            return;
        };
        let ((s, st), (e, et)) = self.pair(start, end, None);
        let ty = match (&st, &et) {
            (Ty::IntLit, Ty::IntLit) => Ty::Prim(Prim::I32),
            (t, _) if !t.is_literal() => t.clone(),
            (_, t) => t.clone(),
        };
        if !ty.is_int() {
            self.err(range, "a #[kernel] `for` range must be of integers");
            return;
        }
        let cty = ty.cuda().unwrap_or_else(|| "int".into());
        self.scopes.push(HashMap::new());
        let name = pi.ident.to_string();
        let cname = self.fresh(&name);
        let step_text = match step {
            Some(st) => format!("{cname} += {}", self.expr(st, Some(&ty)).0),
            None => format!("++{cname}"),
        };
        let cmp = if matches!(range.limits, syn::RangeLimits::Closed(_)) {
            "<="
        } else {
            "<"
        };
        self.emit(&format!("for ({cty} {cname} = {s}; {cname} {cmp} {e}; {step_text}) {{"));
        self.declare(name, cname, ty);
        self.scoped_block(&f.body);
        self.scopes.pop();
        self.emit("}");
    }

    /// Translates two operands that must share a type: a literal takes the other's.
    fn pair(&mut self, a: &syn::Expr, b: &syn::Expr, expected: Option<&Ty>) -> (Out, Out) {
        if is_untyped_literal(a) && !is_untyped_literal(b) {
            let rb = self.expr(b, expected);
            let ra = self.expr(a, Some(&rb.1));
            (ra, rb)
        } else {
            let ra = self.expr(a, expected);
            let rb = self.expr(b, Some(&ra.1));
            (ra, rb)
        }
    }

    /// Translates `e` where a value of type `expected` is wanted: the two types meet (an
    /// index intrinsic's value takes the wanted integer type).
    fn expr(&mut self, e: &syn::Expr, expected: Option<&Ty>) -> Out {
        let out = self.expr_inner(e, expected);
        if let Some(t) = expected {
            self.flex.unify(t, &out.1);
        }
        out
    }

    fn expr_inner(&mut self, e: &syn::Expr, expected: Option<&Ty>) -> Out {
        match e {
            syn::Expr::Lit(l) => self.literal(&l.lit, expected),
            syn::Expr::Path(p) => self.path(p),
            syn::Expr::Paren(p) => {
                let (t, ty) = self.expr(&p.expr, expected);
                (format!("({t})"), ty)
            }
            syn::Expr::Binary(b) => self.binary(b, expected),
            syn::Expr::Unary(u) => {
                let (t, ty) = self.expr(&u.expr, expected);
                match u.op {
                    syn::UnOp::Neg(_) => (format!("(-{t})"), ty),
                    syn::UnOp::Not(_) if ty == Ty::Prim(Prim::Bool) => (format!("(!{t})"), ty),
                    syn::UnOp::Not(_) => (format!("(~{t})"), ty),
                    _ => self.err(
                        u,
                        "references and dereferences are not supported in a #[kernel]; index buffers directly",
                    ),
                }
            }
            syn::Expr::Cast(c) => {
                let Some(target) = scalar_type(&c.ty, &self.generics).filter(|t| matches!(t, Ty::Prim(_))) else {
                    return self.err(&c.ty, "`as` converts between primitive types (f32, i32, usize …); for a generic `T` use `T::from_f64(x)` or `x.to_f64()`");
                };
                let (t, _) = self.expr(&c.expr, None);
                let cty = target.cuda().unwrap_or_default();
                (format!("(({cty})({t}))"), target)
            }
            syn::Expr::Index(ix) => self.index(ix),
            syn::Expr::Field(f) => {
                let (base, bt) = self.expr(&f.base, None);
                let syn::Member::Named(field) = &f.member else {
                    return self.err(&f.member, "tuple fields are not supported in a #[kernel]");
                };
                if let Ty::Vector(elem, lanes) = &bt {
                    return self.vector_field(field, &base, elem, *lanes);
                }
                if !matches!(bt, Ty::Struct(_)) {
                    return self.err(
                        f,
                        "fields can only be read from a #[derive(KernelArg)] struct or a `Vec2`/`Vec4`",
                    );
                }
                let text = format!("{base}.{field}");
                (text.clone(), Ty::Unknown(text))
            }
            syn::Expr::Call(c) => self.call(c, expected),
            syn::Expr::MethodCall(m) => self.method(m),
            syn::Expr::If(i) => self.ternary(i, expected),
            syn::Expr::Match(m) => self.match_value(m, expected),
            syn::Expr::Group(g) => self.expr(&g.expr, expected),
            syn::Expr::Assign(_)
            | syn::Expr::While(_)
            | syn::Expr::Loop(_)
            | syn::Expr::ForLoop(_)
            | syn::Expr::Break(_)
            | syn::Expr::Continue(_)
            | syn::Expr::Return(_) => {
                self.stmt_expr(e);
                unit()
            }
            syn::Expr::Block(_) => {
                self.stmt_expr(e);
                unit()
            }
            syn::Expr::Struct(st) => self.struct_literal(st),
            other => {
                let what = match other {
                    syn::Expr::Closure(_) => "closures",
                    syn::Expr::Reference(_) => "references (`&x`)",
                    syn::Expr::Tuple(_) => "tuples",
                    syn::Expr::Array(_) | syn::Expr::Repeat(_) => "arrays (use `shared_array` or a buffer)",
                    syn::Expr::Range(_) => "ranges outside a `for` loop",
                    syn::Expr::Try(_) => "the `?` operator",
                    syn::Expr::Async(_) | syn::Expr::Await(_) => "async code",
                    syn::Expr::Macro(_) => "macros (a GPU kernel cannot print, format or panic)",
                    syn::Expr::Unsafe(_) => "`unsafe` blocks",
                    _ => "this expression",
                };
                self.err(other, format!("{what} are not supported in a #[kernel] body"))
            }
        }
    }

    fn literal(&mut self, l: &syn::Lit, expected: Option<&Ty>) -> Out {
        let want = expected.filter(|t| t.is_value()).cloned();
        match l {
            syn::Lit::Bool(b) => (b.value.to_string(), Ty::Prim(Prim::Bool)),
            syn::Lit::Int(i) => {
                let digits = i.base10_digits().to_string();
                let big = digits.parse::<i64>().map_or(true, |v| v > i32::MAX as i64);
                let lit = if big { format!("{digits}ull") } else { digits };
                let suffix = i.suffix();
                let ty = if !suffix.is_empty() {
                    match Prim::from_name(suffix) {
                        Some(p) => Some(Ty::Prim(p)),
                        None => return self.err(i, format!("unknown literal suffix `{suffix}`")),
                    }
                } else {
                    want
                };
                match ty {
                    Some(t) if t.is_float() => self.float_literal(&format!("{lit}.0"), t),
                    Some(t) => {
                        let cty = t.cuda().unwrap_or_default();
                        (format!("(({cty}){lit})"), t)
                    }
                    None => (lit, Ty::IntLit),
                }
            }
            syn::Lit::Float(f) => {
                let mut digits = f.base10_digits().to_string();
                if !digits.contains(['.', 'e', 'E']) {
                    digits.push_str(".0");
                }
                let suffix = f.suffix();
                let ty = match suffix {
                    "" => want,
                    "f32" => Some(Ty::Prim(Prim::F32)),
                    "f64" => Some(Ty::Prim(Prim::F64)),
                    other => return self.err(f, format!("unknown float suffix `{other}`")),
                };
                match ty {
                    Some(t) => self.float_literal(&digits, t),
                    None => (digits, Ty::FloatLit),
                }
            }
            other => self.err(
                other,
                "strings, characters and byte literals have no place in a #[kernel]",
            ),
        }
    }

    fn float_literal(&mut self, digits: &str, t: Ty) -> Out {
        let text = match &t {
            Ty::Prim(Prim::F32) => format!("{digits}f"),
            Ty::Prim(Prim::F64) => digits.to_string(),
            other => format!("k_from_f64<{}>({digits})", other.cuda().unwrap_or_default()),
        };
        (text, t)
    }

    fn path(&mut self, p: &syn::ExprPath) -> Out {
        if let Some(ident) = p.path.get_ident() {
            let name = ident.to_string();
            return match self.lookup(&name) {
                Some(v) => (v.cname.clone(), v.ty.clone()),
                None => self.err(ident, format!("`{name}` is not a parameter or local of this #[kernel]; items from outside are not visible to the generated CUDA (write a constant's value, or pass it as a parameter)")),
            };
        }
        // `f32::MAX`, `core::f32::consts::PI`, `u32::MAX`.
        let segs: Vec<String> = p.path.segments.iter().map(|s| s.ident.to_string()).collect();
        let (ty_name, konst) = match segs.as_slice() {
            [t, c] => (t.as_str(), c.as_str()),
            [_, t, m, c] if m == "consts" => (t.as_str(), c.as_str()),
            _ => {
                return self.err(
                    p,
                    "paths other than local names and `f32::MAX`-style constants are not supported in a #[kernel]",
                )
            }
        };
        let Some(prim) = Prim::from_name(ty_name) else {
            return self.err(p, format!("`{}` is not visible to the generated CUDA; only constants of primitive types (`f32::MAX`, `u32::MAX`, `f64::consts::PI`) are", segs.join("::")));
        };
        let ty = Ty::Prim(prim);
        if prim.is_float() && !prim.is_half() {
            if let Some(c) = FLOAT_CONSTS.iter().find(|c| c.0 == konst) {
                let v = if prim == Prim::F32 { c.1 } else { c.2 };
                return (format!("(({})({v}))", prim.cuda()), ty);
            }
        } else if !prim.is_float() && prim != Prim::Bool && (konst == "MAX" || konst == "MIN") {
            let v = int_limit(prim, konst == "MAX");
            return (format!("(({})({v}))", prim.cuda()), ty);
        }
        self.err(
            p,
            format!("`{}` is not a constant the generated CUDA knows", segs.join("::")),
        )
    }

    fn binary(&mut self, b: &syn::ExprBinary, expected: Option<&Ty>) -> Out {
        use syn::BinOp::*;
        if compound(&b.op).is_some() {
            self.stmt_expr(&syn::Expr::Binary(b.clone()));
            return unit();
        }
        let bool_ty = Ty::Prim(Prim::Bool);
        match b.op {
            And(_) | Or(_) => {
                let (l, _) = self.expr(&b.left, Some(&bool_ty));
                let (r, _) = self.expr(&b.right, Some(&bool_ty));
                let op = if matches!(b.op, And(_)) { "&&" } else { "||" };
                (format!("({l} {op} {r})"), bool_ty)
            }
            Eq(_) | Lt(_) | Le(_) | Ne(_) | Ge(_) | Gt(_) => {
                let ((l, _), (r, _)) = self.pair(&b.left, &b.right, None);
                let op = op_text(&b.op);
                (format!("({l} {op} {r})"), bool_ty)
            }
            Shl(_) | Shr(_) => {
                let (l, lt) = self.expr(&b.left, expected);
                let (r, _) = self.expr(&b.right, None);
                let op = if matches!(b.op, Shl(_)) { "<<" } else { ">>" };
                (format!("({l} {op} {r})"), lt)
            }
            _ => {
                let ((l, lt), (r, rt)) = self.pair(&b.left, &b.right, expected);
                let ty = if lt.is_literal() { rt } else { lt };
                let op = op_text(&b.op);
                if op == "%" && ty.is_float() {
                    return (format!("k_rem({l}, {r})"), ty);
                }
                (format!("({l} {op} {r})"), ty)
            }
        }
    }

    fn index(&mut self, ix: &syn::ExprIndex) -> Out {
        let base = strip_parens(&ix.expr);
        let syn::Expr::Path(p) = base else {
            return self.err(&ix.expr, "index a buffer or shared array by name (`x[i]`); nested indexing is not supported (compute a flat index)");
        };
        let (b, bt) = self.path(p);
        if let syn::Expr::Tuple(t) = &*ix.index {
            let Ty::Rows { elem, .. } = bt else {
                return self.err(
                    &ix.index,
                    "a buffer takes one index; for rows and columns view it as a matrix: `let m = x.rows(ld);` then `m[(r, c)]`",
                );
            };
            let [r, c] = [t.elems.first(), t.elems.get(1)];
            let (Some(r), Some(c), 2) = (r, c, t.elems.len()) else {
                return self.err(&ix.index, "index a 2-D view with `(row, column)`");
            };
            let (r, _) = self.expr(r, None);
            let (c, _) = self.expr(c, None);
            return (format!("{b}[({r}) * {b}_ld + ({c})]"), *elem);
        }
        let elem = match bt {
            Ty::Rows { .. } => return self.err(&ix.index, "index a 2-D view with `m[(row, column)]`"),
            Ty::Slice { elem, .. } | Ty::Shared { elem, .. } => *elem,
            Ty::Unit => return (b, Ty::Unit),
            _ => return self.err(&ix.expr, "only buffers and shared arrays can be indexed in a #[kernel]"),
        };
        // Any integer indexes (an index intrinsic's value keeps its own type).
        let (i, it) = self.expr(&ix.index, None);
        // A value only C++ types (a struct field), or one reported already, passes.
        if !it.is_int() && it != Ty::Unit && !matches!(it, Ty::Unknown(_)) {
            if let syn::Expr::Range(_) = &*ix.index {
                return self.err(
                    &ix.index,
                    "slicing (`x[a..b]`) is not supported in a #[kernel]; index elements",
                );
            }
            return self.err(&ix.index, "a buffer index must be an integer (usually `usize`)");
        }
        (format!("{b}[{i}]"), elem)
    }

    fn ternary(&mut self, i: &syn::ExprIf, expected: Option<&Ty>) -> Out {
        let single = |b: &syn::Block| -> Option<syn::Expr> {
            match b.stmts.as_slice() {
                [syn::Stmt::Expr(e, None)] => Some(e.clone()),
                _ => None,
            }
        };
        let else_expr = match &i.else_branch {
            Some((_, e)) => match &**e {
                syn::Expr::Block(b) => single(&b.block),
                syn::Expr::If(_) => Some((**e).clone()),
                _ => None,
            },
            None => None,
        };
        let (Some(a), Some(b)) = (single(&i.then_branch), else_expr) else {
            return self.err(
                i,
                "an `if` used as a value needs an `else` and one expression per branch: `if c { a } else { b }`",
            );
        };
        let (c, _) = self.expr(&i.cond, Some(&Ty::Prim(Prim::Bool)));
        let ((a, at), (b, bt)) = self.pair(&a, &b, expected);
        let ty = if at.is_literal() { bt } else { at };
        (format!("({c} ? {a} : {b})"), ty)
    }

    fn call(&mut self, c: &syn::ExprCall, expected: Option<&Ty>) -> Out {
        let syn::Expr::Path(p) = &*c.func else {
            return self.err(&c.func, call_hint());
        };
        let segs: Vec<&syn::PathSegment> = p.path.segments.iter().collect();
        if let [seg] = segs.as_slice() {
            let name = seg.ident.to_string();
            if let Some((_, cuda)) = INDEX_INTRINSICS.iter().find(|i| i.0 == name) {
                if !c.args.is_empty() {
                    return self.err(&c.args, format!("`{name}()` takes no arguments"));
                }
                let ty = self.flex.fresh(c);
                return (cuda.replace("{T}", &ty.cuda().unwrap_or_default()), ty);
            }
            if let Some((_, cuda)) = WARP_SYNC.iter().find(|s| s.0 == name) {
                if !c.args.is_empty() {
                    return self.err(&c.args, format!("`{name}()` takes no arguments"));
                }
                return (cuda.to_string(), Ty::Unit);
            }
            if let Some((_, cuda, ty)) = VOTES.iter().find(|v| v.0 == name) {
                if c.args.len() != 1 {
                    return self.err(c, format!("`{name}(predicate)` takes one `bool`"));
                }
                let (p, _) = self.expr(&c.args[0], Some(&Ty::Prim(Prim::Bool)));
                let ty = Ty::Prim(if *ty == "u32" { Prim::U32 } else { Prim::Bool });
                return (cuda.replace("{p}", &p), ty);
            }
            if ATOMICS.iter().any(|a| a.0 == name) {
                // `atomic_add(&mut y[i], v)`, the CUDA spelling: say the DSL's.
                let target = match c.args.first() {
                    Some(syn::Expr::Reference(r)) => match strip_parens(&r.expr) {
                        syn::Expr::Index(ix) => Some((
                            quote::ToTokens::to_token_stream(&ix.expr).to_string(),
                            quote::ToTokens::to_token_stream(&ix.index).to_string(),
                        )),
                        _ => None,
                    },
                    _ => None,
                };
                let rest: Vec<String> = c
                    .args
                    .iter()
                    .skip(1)
                    .map(|a| quote::ToTokens::to_token_stream(a).to_string())
                    .collect();
                let hint = match target {
                    Some((buf, i)) => format!("write `{buf}.{name}({i}, {})`", rest.join(", ")),
                    None => format!("write `buffer.{name}(index, …)`"),
                };
                return self.err(
                    c,
                    format!("atomics are methods of the buffer (or shared array) in a #[kernel]: {hint}"),
                );
            }
            if name == "cpu_unsupported" {
                return self.err(
                    c,
                    "`cpu_unsupported()` only belongs in the Rust body of a `#[kernel(cuda = \"…\")]` kernel",
                );
            }
            if let Some((_, cuda)) = SHUFFLES.iter().find(|s| s.0 == name) {
                if c.args.len() != 2 {
                    return self.err(c, format!("`{name}(value, n)` takes a value and a lane offset"));
                }
                let (v, vt) = self.expr(&c.args[0], expected);
                let (n, _) = self.expr(&c.args[1], Some(&Ty::Prim(Prim::U32)));
                return (format!("{cuda}(0xffffffffu, {v}, {n})"), vt);
            }
            if name == "shared_array" {
                return self.err(
                    c,
                    "bind a shared array with `let mut`: `let mut tile = shared_array::<T, 256>();`",
                );
            }
            if name == "dyn_shared" {
                return self.err(
                    c,
                    "bind dynamic shared memory with `let mut`: `let mut buf = dyn_shared::<T>();`",
                );
            }
        }
        if let [ty_seg, f] = segs.as_slice() {
            if let Some(kind) = vectors::kind_named(&ty_seg.ident.to_string()) {
                return self.vector_constructor(c, kind, &f.ident, expected);
            }
        }
        // `T::zero()`, `f32::from_f64(x)`.
        if let [ty_seg, f] = segs.as_slice() {
            let tname = ty_seg.ident.to_string();
            let ty = self
                .generics
                .get(&tname)
                .map(|b| Ty::Generic(tname.clone(), *b))
                .or_else(|| Prim::from_name(&tname).map(Ty::Prim));
            if let Some(ty) = ty {
                let fname = f.ident.to_string();
                let cty = ty.cuda().unwrap_or_default();
                if fname == "from_f64" && c.args.len() == 1 {
                    let (x, _) = self.expr(&c.args[0], Some(&Ty::Prim(Prim::F64)));
                    return (format!("k_from_f64<{cty}>({x})"), ty);
                }
                if fname == "from_f32" && c.args.len() == 1 {
                    let (x, _) = self.expr(&c.args[0], Some(&Ty::Prim(Prim::F32)));
                    return (format!("k_from_f32<{cty}>({x})"), ty);
                }
                if let Some((_, tpl)) = TYPE_FUNCTIONS.iter().find(|t| t.0 == fname) {
                    if ty.is_int() && (fname == "zero" || fname == "one") {
                        let v = if fname == "zero" { 0 } else { 1 };
                        return (format!("(({cty}){v})"), ty);
                    }
                    if ty.is_float() && c.args.is_empty() {
                        return (tpl.replace("{T}", &cty), ty);
                    }
                }
                return self.err(
                    &p.path,
                    format!("`{tname}::{fname}` cannot be called from a #[kernel]: {}", call_hint()),
                );
            }
        }
        self.device_call(c, p)
    }

    /// `P { x: a, y: b }` of a `#[derive(KernelArg)]` struct (its C++ declaration joins
    /// the source): every field given, each converted to its field's type by C++.
    fn struct_literal(&mut self, st: &syn::ExprStruct) -> Out {
        if let Some(rest) = &st.rest {
            return self.err(
                rest,
                "give every field of a struct literal in a #[kernel] (no `..base`)",
            );
        }
        if st.qself.is_some() {
            return self.err(st, "name the struct by its path: `Params { … }`");
        }
        let name = st.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default();
        let mut sets = vec![];
        for f in &st.fields {
            let syn::Member::Named(field) = &f.member else {
                return self.err(&f.member, "a #[kernel] struct literal names its fields");
            };
            let (v, _) = self.expr(&f.expr, None);
            sets.push(format!("k_s.{field} = {v};"));
        }
        self.note_struct(&st.path);
        // An immediately-called lambda: a value expression whatever the field order.
        (
            format!("([&]() {{ {name} k_s; {} return k_s; }}())", sets.join(" ")),
            Ty::Struct(name),
        )
    }

    /// Records a `#[derive(KernelArg)]` struct the body uses, for its declaration.
    fn note_struct(&mut self, path: &syn::Path) {
        let key = quote::ToTokens::to_token_stream(path).to_string();
        if !self
            .structs
            .iter()
            .any(|p| quote::ToTokens::to_token_stream(p).to_string() == key)
        {
            self.structs.push(path.clone());
        }
    }

    /// A `#[derive(KernelArg)]` struct named in a `let` annotation, if `t` is one.
    fn struct_type(&mut self, t: &syn::Type) -> Option<Ty> {
        let syn::Type::Path(p) = t else { return None };
        let last = p.path.segments.last()?;
        let name = last.ident.to_string();
        if p.qself.is_some()
            || !last.arguments.is_none()
            || vectors::kind_named(&name).is_some()
            || !name.starts_with(char::is_uppercase)
        {
            return None;
        }
        self.note_struct(&p.path);
        Some(Ty::Struct(name))
    }

    /// A call of a `#[device] fn` (any other function is reported by rustc where the
    /// kernel's module names the helper's generated items): `name(args)` in C++, a buffer
    /// argument passed with its length, generic arguments deduced as C++ does or given
    /// by a turbofish.
    fn device_call(&mut self, c: &syn::ExprCall, p: &syn::ExprPath) -> Out {
        let Some(last) = p.path.segments.last() else {
            return self.err(&p.path, call_hint());
        };
        if p.qself.is_some() || p.path.segments.iter().rev().skip(1).any(|s| !s.arguments.is_none()) {
            return self.err(
                &p.path,
                format!("this function cannot be called from a #[kernel]: {}", call_hint()),
            );
        }
        let name = last.ident.to_string();
        if name == self.name && self.ret.is_some() {
            return self.err(
                &p.path,
                format!("`{name}` calls itself: a #[device] fn cannot recurse (CUDA's per-thread stack is small and the depth unknown); write it as a loop"),
            );
        }
        let mut template = String::new();
        if let syn::PathArguments::AngleBracketed(a) = &last.arguments {
            let mut tys = vec![];
            for g in &a.args {
                match g {
                    syn::GenericArgument::Type(t) => match scalar_type(t, &self.generics) {
                        Some(t) => tys.push(t.cuda().unwrap_or_default()),
                        None => {
                            return self.err(
                                t,
                                "a #[device] fn's generic argument is a scalar type or a generic parameter",
                            )
                        }
                    },
                    other => return self.err(other, "a #[device] fn takes type arguments only"),
                }
            }
            template = format!("<{}>", tys.join(", "));
        }
        let mut path = p.path.clone();
        if let Some(l) = path.segments.last_mut() {
            l.arguments = syn::PathArguments::None;
        }
        let key = quote::ToTokens::to_token_stream(&path).to_string();
        if !self
            .calls
            .iter()
            .any(|c| quote::ToTokens::to_token_stream(c).to_string() == key)
        {
            self.calls.push(path);
        }
        let mut args = vec![];
        for a in &c.args {
            let (t, ty) = self.expr(a, None);
            match ty {
                Ty::Slice { .. } => args.push(format!("{t}, {t}_len")),
                Ty::Shared { .. } => {
                    return self.err(
                        a,
                        "shared arrays cannot be passed to a #[device] fn; index them in the kernel and pass values",
                    );
                }
                Ty::Flex(_, false) => {
                    self.converts.insert(a as *const syn::Expr as usize);
                    args.push(t);
                }
                _ => args.push(t),
            }
        }
        let cname = param_cname(&name);
        let text = format!("{cname}{template}({})", args.join(", "));
        (text.clone(), Ty::Unknown(text))
    }

    fn method(&mut self, m: &syn::ExprMethodCall) -> Out {
        let name = m.method.to_string();
        if m.turbofish.is_some() {
            return self.err(&m.method, "turbofish method calls are not supported in a #[kernel]");
        }
        // Buffer methods take the buffer by name.
        if let syn::Expr::Path(p) = strip_parens(&m.receiver) {
            if let Some(v) = p.path.get_ident().and_then(|i| self.lookup(&i.to_string())) {
                let (cname, ty) = (v.cname.clone(), v.ty.clone());
                match (&ty, name.as_str()) {
                    (Ty::Slice { .. } | Ty::Rows { .. }, "len") => {
                        return (format!("{cname}_len"), Ty::Prim(Prim::Usize))
                    }
                    (Ty::Rows { .. }, "stride") => return (format!("{cname}_ld"), Ty::Prim(Prim::Usize)),
                    (Ty::Slice { .. }, "rows") => {
                        return self.err(m, "bind a 2-D view with `let`: `let m = x.rows(ld);`, then `m[(r, c)]`")
                    }
                    (Ty::Slice { .. } | Ty::Rows { .. }, "is_empty") => {
                        return (format!("({cname}_len == 0)"), Ty::Prim(Prim::Bool))
                    }
                    (Ty::Shared { n, .. }, "len") => return (format!("((k_usize){n})"), Ty::Prim(Prim::Usize)),
                    _ => {}
                }
                if let (Ty::Slice { elem, mutable }, Some((kind, store))) = (&ty, vectors::access_named(&name)) {
                    return self.vector_access(m, kind, store, &cname, elem, *mutable);
                }
                if let Some((_, helper, n)) = ATOMICS.iter().find(|a| a.0 == name) {
                    let elem = match &ty {
                        Ty::Slice { elem, mutable: true } | Ty::Shared { elem, .. } => (**elem).clone(),
                        Ty::Slice { mutable: false, .. } => {
                            return self.err(&m.receiver, format!("`{name}` writes: take the buffer as `&mut [T]`"));
                        }
                        _ => {
                            return self.err(
                                &m.receiver,
                                format!("`{name}` is a method of writable buffers and shared arrays"),
                            )
                        }
                    };
                    if m.args.len() != *n {
                        return self.err(
                            &m.method,
                            format!(
                                "`{name}` takes {n} arguments (the index, then the value{})",
                                if *n == 3 { "s" } else { "" }
                            ),
                        );
                    }
                    let (i, _) = self.expr(&m.args[0], None);
                    let mut args = vec![format!("&{cname}[{i}]")];
                    for a in m.args.iter().skip(1) {
                        args.push(self.expr(a, Some(&elem)).0);
                    }
                    return (format!("{helper}({})", args.join(", ")), elem);
                }
                if matches!(ty, Ty::Slice { .. } | Ty::Shared { .. } | Ty::Rows { .. }) {
                    return self.err(
                        &m.method,
                        format!("`{name}` is not a #[kernel] buffer method; {}", method_hint()),
                    );
                }
            }
        }
        let (r, rt) = self.expr(&m.receiver, None);
        if rt == Ty::Unknown("0".into()) {
            // The receiver was reported already.
            return (r, rt);
        }
        let arity = m.args.len();
        if UNARY_MATH.contains(&name.as_str()) && arity == 0 {
            if !(rt.is_float() || (rt.is_int() && name == "abs")) {
                return self.err(&m.receiver, format!("`{name}` needs a float receiver"));
            }
            return (format!("k_{name}({r})"), rt);
        }
        if BINARY_MATH.contains(&name.as_str()) && arity == 1 {
            let (a, _) = self.expr(&m.args[0], Some(&rt));
            return (format!("k_{name}({r}, {a})"), rt);
        }
        match (name.as_str(), arity) {
            ("mul_add", 2) => {
                let (a, _) = self.expr(&m.args[0], Some(&rt));
                let (b, _) = self.expr(&m.args[1], Some(&rt));
                (format!("k_mul_add({r}, {a}, {b})"), rt)
            }
            ("powi", 1) => {
                let (n, _) = self.expr(&m.args[0], Some(&Ty::Prim(Prim::I32)));
                (format!("k_powi({r}, {n})"), rt)
            }
            ("to_f64", 0) => (format!("k_to_f64({r})"), Ty::Prim(Prim::F64)),
            ("to_f32", 0) => (format!("k_to_f32({r})"), Ty::Prim(Prim::F32)),
            _ => self.err(
                &m.method,
                format!("`{name}` cannot be called in a #[kernel]; {}", method_hint()),
            ),
        }
    }
}

/// The names a pattern binds.
fn pattern_names(p: &syn::Pat, out: &mut Vec<String>) {
    match p {
        syn::Pat::Ident(i) => out.push(i.ident.to_string()),
        syn::Pat::Tuple(t) => t.elems.iter().for_each(|e| pattern_names(e, out)),
        syn::Pat::TupleStruct(t) => t.elems.iter().for_each(|e| pattern_names(e, out)),
        syn::Pat::Paren(p) => pattern_names(&p.pat, out),
        syn::Pat::Type(t) => pattern_names(&t.pat, out),
        syn::Pat::Struct(s) => s.fields.iter().for_each(|f| pattern_names(&f.pat, out)),
        _ => {}
    }
}

/// True for an expression that reads as a statement when it ends a block (a loop, an
/// `if` without `else`, an assignment), not as the block's value.
fn is_statement_like(e: &syn::Expr) -> bool {
    match e {
        syn::Expr::If(i) => i.else_branch.is_none(),
        syn::Expr::While(_)
        | syn::Expr::ForLoop(_)
        | syn::Expr::Loop(_)
        | syn::Expr::Assign(_)
        | syn::Expr::Return(_)
        | syn::Expr::Break(_)
        | syn::Expr::Continue(_) => true,
        syn::Expr::Binary(b) => compound(&b.op).is_some(),
        _ => false,
    }
}

fn strip_parens(e: &syn::Expr) -> &syn::Expr {
    match e {
        syn::Expr::Paren(p) => strip_parens(&p.expr),
        syn::Expr::Group(g) => strip_parens(&g.expr),
        other => other,
    }
}

fn is_untyped_literal(e: &syn::Expr) -> bool {
    match strip_parens(e) {
        syn::Expr::Lit(l) => match &l.lit {
            syn::Lit::Int(i) => i.suffix().is_empty(),
            syn::Lit::Float(f) => f.suffix().is_empty(),
            _ => false,
        },
        syn::Expr::Unary(u) => is_untyped_literal(&u.expr),
        _ => false,
    }
}

fn compound(op: &syn::BinOp) -> Option<&'static str> {
    use syn::BinOp::*;
    Some(match op {
        AddAssign(_) => "+=",
        SubAssign(_) => "-=",
        MulAssign(_) => "*=",
        DivAssign(_) => "/=",
        RemAssign(_) => "%=",
        BitXorAssign(_) => "^=",
        BitAndAssign(_) => "&=",
        BitOrAssign(_) => "|=",
        ShlAssign(_) => "<<=",
        ShrAssign(_) => ">>=",
        _ => return None,
    })
}

fn int_limit(p: Prim, max: bool) -> String {
    let bits = match p {
        Prim::I8 | Prim::U8 => 8,
        Prim::I16 | Prim::U16 => 16,
        Prim::I32 | Prim::U32 => 32,
        _ => 64,
    };
    let signed = matches!(p, Prim::I8 | Prim::I16 | Prim::I32 | Prim::I64 | Prim::Isize);
    match (signed, max) {
        (true, true) => format!("{}ll", (1i128 << (bits - 1)) - 1),
        (true, false) => format!("(-{}ll - 1)", (1i128 << (bits - 1)) - 1),
        (false, true) => format!("{}ull", (1u128 << bits) - 1),
        (false, false) => "0".into(),
    }
}

/// The operator's text (`+`, `<=`, …).
fn op_text(op: &syn::BinOp) -> String {
    quote::ToTokens::to_token_stream(op).to_string()
}
