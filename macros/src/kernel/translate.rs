//! Validate + translate: a kernel body, in the Rust subset, to CUDA C++.
//!
//! One walk over the body does both: every construct either has a translation or is a
//! compile error at its span with a hint (never a silent miscompile), so the checker and
//! the translator cannot disagree about what the subset is. Types are tracked just far
//! enough to type literals the way rustc does (a literal takes the type of the value it
//! meets), declare `let`s with their C++ type and pick operators. Every statement is
//! preceded by a `#line` marker so NVRTC errors point at the Rust source.
//!
//! This file holds the walk's state (`Tr`) and its entry; the constructs live in
//! submodules, one each: `bindings` (`let`, `const`), `statements` (control flow,
//! assignment), `expressions` (literals, operators, indexing), `calls` (intrinsics,
//! helpers, methods), `matches`, `memory` (shared arrays, `dyn_shared`, 2-D views),
//! `structs` and `vectors`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write;

use proc_macro2::Span;
use syn::spanned::Spanned;

use super::flex::FlexInts;
use super::intrinsics::*;
use super::names::param_cname;
use super::signature::{scalar_type, ParamKind, Signature};
use super::types::{Bound, Prim, Ty};
use crate::errors::Errors;

mod bindings;
mod calls;
mod expressions;
mod matches;
mod memory;
mod statements;
mod structs;
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
    // A refused parameter is in scope with the reported type: its uses say nothing more.
    for name in &sig.rejected {
        let var = Var {
            cname: String::from("0"),
            ty: Ty::reported(),
        };
        tr.scopes[0].insert(name.to_string(), var);
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

impl Tr<'_> {
    fn err(&mut self, at: impl Spanned, msg: impl std::fmt::Display) -> Out {
        self.errors.push(syn::Error::new(at.span(), msg));
        // An unknown type raises no further errors where the value is used.
        (String::from("0"), Ty::reported())
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

    fn declare(&mut self, name: String, cname: String, ty: Ty) {
        self.scopes.last_mut().expect("a scope").insert(name, Var { cname, ty });
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
                if bt.is_reported() {
                    // The base was reported already.
                    return (base, bt);
                }
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
            | syn::Expr::Return(_)
            | syn::Expr::Block(_) => {
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
