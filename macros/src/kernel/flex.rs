//! The integer type of an index intrinsic's value, decided by its use.
//!
//! CUDA's `threadIdx.x` is an `unsigned int`, and CUDA users write
//! `let x = block_idx_x() * block_dim_x() + thread_idx_x(); if x < w { … }` with
//! `w: u32`; Rust users write `let i = global_index(); if i < y.len() { … }` with
//! `usize`. Both are natural, so an index intrinsic's value behaves like an integer
//! literal: it takes the integer type of the first typed integer it meets (an operand, an
//! annotated `let`, an assignment target, a `for` bound), and is `usize` when it meets
//! none. Values computed from several intrinsics share one type.
//!
//! The translator tracks each intrinsic call as a *flex* variable (union–find over the
//! calls whose values meet), writes a placeholder for its C++ type and fills it in at the
//! end; the CPU emulation's Rust body gets the same decision as an `as` cast on each call
//! whose type is not `usize` — so the two backends cannot disagree.

use std::collections::{HashMap, HashSet};

use syn::visit::Visit;
use syn::visit_mut::VisitMut;

use super::types::{Prim, Ty};

/// The flex variables of one kernel body.
#[derive(Default)]
pub(crate) struct FlexInts {
    parent: Vec<usize>,
    resolved: Vec<Option<Prim>>,
    /// Each intrinsic call's address in the parsed body, and its variable.
    sites: Vec<(usize, usize)>,
}

impl FlexInts {
    /// A new variable for the intrinsic call `site`: its type, and the placeholder its C++
    /// text uses for the type.
    pub(crate) fn fresh(&mut self, site: &syn::ExprCall) -> Ty {
        let id = self.parent.len();
        self.parent.push(id);
        self.resolved.push(None);
        self.sites.push((site as *const syn::ExprCall as usize, id));
        Ty::Flex(id)
    }

    fn find(&self, mut i: usize) -> usize {
        while self.parent[i] != i {
            i = self.parent[i];
        }
        i
    }

    /// Two values meet (operands of one operator, a target and its value): a flex one
    /// takes the other's integer type, or two flex ones become one.
    pub(crate) fn unify(&mut self, a: &Ty, b: &Ty) {
        match (a, b) {
            (Ty::Flex(x), Ty::Flex(y)) => {
                let (rx, ry) = (self.find(*x), self.find(*y));
                if rx != ry {
                    let r = self.resolved[rx].or(self.resolved[ry]);
                    self.parent[ry] = rx;
                    self.resolved[rx] = r;
                }
            }
            (Ty::Flex(x), Ty::Prim(p)) | (Ty::Prim(p), Ty::Flex(x)) if is_int(*p) => {
                let r = self.find(*x);
                self.resolved[r].get_or_insert(*p);
            }
            _ => {}
        }
    }

    /// The type variable `id` ended up with.
    pub(crate) fn prim(&self, id: usize) -> Prim {
        self.resolved[self.find(id)].unwrap_or(Prim::Usize)
    }

    /// The C++ placeholder for variable `id`'s type.
    pub(crate) fn placeholder(id: usize) -> String {
        format!("@FLEX{id}@")
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
            out.push_str(self.prim(id).cuda());
            rest = &tail[end + 1..];
        }
        out.push_str(rest);
        out
    }

    /// The calls whose type is not `usize` (what the intrinsic returns in Rust), by
    /// address in the parsed body.
    pub(crate) fn casts(&self) -> HashMap<usize, Prim> {
        self.sites
            .iter()
            .map(|&(addr, id)| (addr, self.prim(id)))
            .filter(|(_, p)| *p != Prim::Usize)
            .collect()
    }
}

fn is_int(p: Prim) -> bool {
    !p.is_float() && p != Prim::Bool
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
