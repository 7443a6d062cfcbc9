//! Types decided by use: index intrinsics' values and `let`s of untyped literals.
//!
//! CUDA's `threadIdx.x` is an `unsigned int`, and CUDA users write
//! `let x = block_idx_x() * block_dim_x() + thread_idx_x(); if x < w { … }` with
//! `w: u32`; Rust users write `let i = global_index(); if i < y.len() { … }` with
//! `usize`. Both are natural, so an index intrinsic's value behaves like an integer
//! literal: it takes the integer type of the first typed integer it meets (an operand, an
//! annotated `let`, an assignment target, a `for` bound), and is `usize` when it meets
//! none. Values computed from several intrinsics share one type.
//!
//! A `let` of an untyped literal (`let mut k = 0;`, `let mut acc = 0.0;`) is typed the
//! same way, as rustc types it: by what it meets (`k < n`, `acc += x[i]` with `x: &[T]`),
//! `i32` / `f64` when it meets nothing (rustc's fallback). An intrinsic's value assigned
//! to such a `let` makes it `usize`, as rustc does.
//!
//! The translator tracks each as a *flex* variable (union–find over the values that
//! meet), writes a placeholder for its C++ type and fills it in at the end; the CPU
//! emulation's Rust body gets the same decision for intrinsics as an `as` cast on each
//! call whose type is not `usize` (rustc infers the literals itself) — so the two
//! backends agree.

use std::collections::{HashMap, HashSet};

use syn::visit::Visit;
use syn::visit_mut::VisitMut;

use super::types::{Bound, Prim, Ty};

/// The flex variables of one body.
#[derive(Default)]
pub(crate) struct FlexInts {
    parent: Vec<usize>,
    resolved: Vec<Option<Ty>>,
    /// What each root becomes when nothing decides: `usize` for intrinsics, rustc's
    /// fallback (`i32`, `f64`) for literals.
    fallback: Vec<Prim>,
    /// Each intrinsic call's address in the parsed body, and its variable.
    sites: Vec<(usize, usize)>,
}

impl FlexInts {
    fn push(&mut self, fallback: Prim) -> usize {
        let id = self.parent.len();
        self.parent.push(id);
        self.resolved.push(None);
        self.fallback.push(fallback);
        id
    }

    /// A new variable for the intrinsic call `site`.
    pub(crate) fn fresh(&mut self, site: &syn::ExprCall) -> Ty {
        let id = self.push(Prim::Usize);
        self.sites.push((site as *const syn::ExprCall as usize, id));
        Ty::Flex(id, false)
    }

    /// A new variable for a `let` of an untyped literal (`float`: a float literal).
    pub(crate) fn literal(&mut self, float: bool) -> Ty {
        let id = self.push(if float { Prim::F64 } else { Prim::I32 });
        Ty::Flex(id, float)
    }

    fn find(&self, mut i: usize) -> usize {
        while self.parent[i] != i {
            i = self.parent[i];
        }
        i
    }

    /// Two values meet (operands of one operator, a target and its value): a flex one
    /// takes the other's type if it is of its kind, or two flex ones become one.
    pub(crate) fn unify(&mut self, a: &Ty, b: &Ty) {
        match (a, b) {
            (Ty::Flex(x, fx), Ty::Flex(y, fy)) if fx == fy => {
                let (rx, ry) = (self.find(*x), self.find(*y));
                if rx != ry {
                    let r = self.resolved[rx].clone().or(self.resolved[ry].clone());
                    // An intrinsic's value makes a literal's variable `usize` (rustc
                    // sees the intrinsic's `usize`).
                    let fallback = if self.fallback[ry] == Prim::Usize {
                        Prim::Usize
                    } else {
                        self.fallback[rx]
                    };
                    self.parent[ry] = rx;
                    self.resolved[rx] = r;
                    self.fallback[rx] = fallback;
                }
            }
            (Ty::Flex(x, float), t) | (t, Ty::Flex(x, float)) if fits(t, *float) => {
                let r = self.find(*x);
                if self.resolved[r].is_none() {
                    self.resolved[r] = Some(t.clone());
                }
            }
            _ => {}
        }
    }

    /// The type variable `id` ended up with.
    fn ty(&self, id: usize) -> Ty {
        let r = self.find(id);
        self.resolved[r].clone().unwrap_or(Ty::Prim(self.fallback[r]))
    }

    /// `text` with every placeholder replaced by its C++ type.
    pub(crate) fn fill(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(at) = rest.find("@FLEX") {
            out.push_str(&rest[..at]);
            let tail = &rest[at + 5..];
            let end = tail.find('@').expect("a placeholder ends with @");
            let id: usize = tail[..end].parse().expect("a placeholder holds a number");
            out.push_str(&self.ty(id).cuda().unwrap_or_default());
            rest = &tail[end + 1..];
        }
        out.push_str(rest);
        out
    }

    /// The intrinsic calls whose type is a primitive other than `usize` (what the
    /// intrinsic returns in Rust), by address in the parsed body.
    pub(crate) fn casts(&self) -> HashMap<usize, Prim> {
        self.sites
            .iter()
            .filter_map(|&(addr, id)| match self.ty(id) {
                Ty::Prim(p) if p != Prim::Usize => Some((addr, p)),
                _ => None,
            })
            .collect()
    }
}

/// Whether a flex variable of the kind (`float`) can become `t`.
fn fits(t: &Ty, float: bool) -> bool {
    match t {
        Ty::Prim(p) => *p != Prim::Bool && p.is_float() == float,
        Ty::Generic(_, b) => (*b == Bound::Float) == float,
        _ => false,
    }
}

/// The body the CPU emulation runs: `block` with `(call as T)` around each intrinsic
/// call the translator typed `T` other than `usize`, and each index value passed to a
/// `#[device] fn` (whose parameter types a kernel cannot see) converted to the type the
/// parameter has, as a literal would be. Both maps are keyed by addresses in `block`
/// itself (the block the translator walked).
pub(crate) fn retype_cpu_body(
    block: &syn::Block,
    casts: &HashMap<usize, Prim>,
    converts: &HashSet<usize>,
    krate: &syn::Path,
) -> syn::Block {
    if casts.is_empty() && converts.is_empty() {
        return block.clone();
    }
    // What to do with each expression, in visiting order; the clone is visited in the
    // same order.
    struct Plan<'m> {
        casts: &'m HashMap<usize, Prim>,
        converts: &'m HashSet<usize>,
        steps: Vec<(Option<Prim>, bool)>,
    }
    impl<'ast> Visit<'ast> for Plan<'_> {
        fn visit_expr(&mut self, e: &'ast syn::Expr) {
            let cast = match e {
                syn::Expr::Call(c) => self.casts.get(&(c as *const syn::ExprCall as usize)).copied(),
                _ => None,
            };
            let convert = self.converts.contains(&(e as *const syn::Expr as usize));
            self.steps.push((cast, convert));
            syn::visit::visit_expr(self, e);
        }
    }
    let mut plan = Plan {
        casts,
        converts,
        steps: vec![],
    };
    plan.visit_block(block);

    struct Retype<'k> {
        steps: Vec<(Option<Prim>, bool)>,
        next: usize,
        krate: &'k syn::Path,
    }
    impl VisitMut for Retype<'_> {
        fn visit_expr_mut(&mut self, e: &mut syn::Expr) {
            let (cast, convert) = self.steps[self.next];
            self.next += 1;
            syn::visit_mut::visit_expr_mut(self, e);
            if let Some(p) = cast {
                let ty = quote::format_ident!("{}", p.rust());
                *e = syn::parse_quote!((#e as #ty));
            }
            if convert {
                let krate = self.krate;
                *e = syn::parse_quote!(#krate::kernel::dsl::index::FromIndex::from_index(#e));
            }
        }
    }
    let mut out = block.clone();
    Retype {
        steps: plan.steps,
        next: 0,
        krate,
    }
    .visit_block_mut(&mut out);
    out
}
