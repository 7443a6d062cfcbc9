//! The CPU body's element accesses as relaxed atomics, so that a kernel whose threads
//! race gets a wrong value on the CPU device, not undefined behaviour.
//!
//! The emulation runs blocks on several OS threads at once and hands each thread a copy
//! of a buffer's handle (as the GPU hands each its pointer). A plain `y[i] = v` through
//! `IndexMut` makes a `&mut` to the element: two threads doing that to one element is a
//! data race in Rust's sense. So the CPU body — not the CUDA one — reads and writes the
//! elements of its buffer parameters, and of the 2-D views made from them
//! (`let m = x.rows(ld)`), through the handles' relaxed atomic `__load` / `__store`:
//!
//! - `x[i]` read as a value becomes `x.__load(i)`;
//! - `y[i] = v` becomes `y.__store(i, v)` (the value evaluated first, as in Rust);
//! - `y[i] op= v` loads, applies `op=` to the copy, stores.
//!
//! An element used as a place in any other way (`&mut y[i]`, `y[i].re = v`) keeps its
//! `IndexMut` access.

use std::collections::HashSet;

use syn::visit_mut::VisitMut;
use syn::{BinOp, Expr};

/// `block` with the accesses to the elements of `buffers` (and of the views `let`-bound
/// from them with `.rows(…)`) rewritten as described in the module docs.
pub(crate) fn relaxed_element_access(block: &syn::Block, buffers: &[syn::Ident]) -> syn::Block {
    let mut names: HashSet<String> = buffers.iter().map(|b| b.to_string()).collect();
    if names.is_empty() {
        return block.clone();
    }
    let mut views = Views { names: &mut names };
    syn::visit::Visit::visit_block(&mut views, block);
    let mut block = block.clone();
    Rewrite { names: &names }.visit_block_mut(&mut block);
    block
}

/// Collects `let m = x.rows(ld)` over a buffer `x` (or another view).
struct Views<'n> {
    names: &'n mut HashSet<String>,
}

impl<'ast> syn::visit::Visit<'ast> for Views<'_> {
    fn visit_local(&mut self, l: &'ast syn::Local) {
        if let (syn::Pat::Ident(p), Some(init)) = (&l.pat, &l.init) {
            if let Expr::MethodCall(m) = &*init.expr {
                if m.method == "rows" && single_name(&m.receiver).is_some_and(|r| self.names.contains(&r)) {
                    self.names.insert(p.ident.to_string());
                }
            }
        }
        syn::visit::visit_local(self, l);
    }
}

/// The identifier `e` is, if it is a plain one.
fn single_name(e: &Expr) -> Option<String> {
    match e {
        Expr::Path(p) if p.qself.is_none() => p.path.get_ident().map(|i| i.to_string()),
        Expr::Paren(p) => single_name(&p.expr),
        _ => None,
    }
}

struct Rewrite<'n> {
    names: &'n HashSet<String>,
}

impl Rewrite<'_> {
    /// `(base, index)` when `e` indexes a buffer or view directly.
    fn buffer_element(&self, e: &Expr) -> Option<(Expr, Expr)> {
        match e {
            Expr::Index(ix) if single_name(&ix.expr).is_some_and(|n| self.names.contains(&n)) => {
                Some(((*ix.expr).clone(), (*ix.index).clone()))
            }
            _ => None,
        }
    }

    /// Visits a place (the target of an assignment or a borrow) without turning its own
    /// element access into a load; what it is indexed with is visited as usual.
    fn visit_place(&mut self, e: &mut Expr) {
        match e {
            Expr::Index(ix) => {
                self.visit_place(&mut ix.expr);
                self.visit_expr_mut(&mut ix.index);
            }
            Expr::Field(f) => self.visit_place(&mut f.base),
            Expr::Paren(p) => self.visit_place(&mut p.expr),
            other => self.visit_expr_mut(other),
        }
    }
}

/// Whether `op` is a compound assignment (`+=`, `<<=`, …).
fn compound(op: &BinOp) -> bool {
    matches!(
        op,
        BinOp::AddAssign(_)
            | BinOp::SubAssign(_)
            | BinOp::MulAssign(_)
            | BinOp::DivAssign(_)
            | BinOp::RemAssign(_)
            | BinOp::BitXorAssign(_)
            | BinOp::BitAndAssign(_)
            | BinOp::BitOrAssign(_)
            | BinOp::ShlAssign(_)
            | BinOp::ShrAssign(_)
    )
}

impl VisitMut for Rewrite<'_> {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        match e {
            Expr::Assign(a) => {
                self.visit_expr_mut(&mut a.right);
                match self.buffer_element(&a.left) {
                    Some((base, mut index)) => {
                        self.visit_expr_mut(&mut index);
                        let value = &a.right;
                        *e = syn::parse_quote!({
                            let __atomr_value = #value;
                            #base.__store(#index, __atomr_value)
                        });
                    }
                    None => self.visit_place(&mut a.left),
                }
            }
            Expr::Binary(b) if compound(&b.op) => {
                self.visit_expr_mut(&mut b.right);
                match self.buffer_element(&b.left) {
                    Some((base, mut index)) => {
                        self.visit_expr_mut(&mut index);
                        let (op, value) = (&b.op, &b.right);
                        *e = syn::parse_quote!({
                            let __atomr_value = #value;
                            let __atomr_at = #index;
                            let mut __atomr_element = #base.__load(__atomr_at);
                            __atomr_element #op __atomr_value;
                            #base.__store(__atomr_at, __atomr_element)
                        });
                    }
                    None => self.visit_place(&mut b.left),
                }
            }
            Expr::Reference(r) => self.visit_place(&mut r.expr),
            Expr::Index(_) => match self.buffer_element(e) {
                Some((base, mut index)) => {
                    self.visit_expr_mut(&mut index);
                    *e = syn::parse_quote!(#base.__load(#index));
                }
                None => syn::visit_mut::visit_expr_mut(self, e),
            },
            _ => syn::visit_mut::visit_expr_mut(self, e),
        }
    }

    /// Closures and nested items are not kernel code the DSL accepts; leave them.
    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::ToTokens;

    fn rewrite(body: &str, buffers: &[&str]) -> String {
        let block: syn::Block = syn::parse_str(body).unwrap();
        let names: Vec<syn::Ident> = buffers
            .iter()
            .map(|b| syn::Ident::new(b, proc_macro2::Span::call_site()))
            .collect();
        relaxed_element_access(&block, &names).to_token_stream().to_string()
    }

    #[test]
    fn reads_writes_and_compound_writes_of_buffers() {
        let out = rewrite("{ y[i] = a * x[i] + y[i]; y[j] += x[k]; let z = t[i]; }", &["x", "y"]);
        assert!(out.contains("y . __store (i , __atomr_value)"), "{out}");
        assert!(
            out.contains("x . __load (i)") && out.contains("y . __load (i)"),
            "{out}"
        );
        assert!(out.contains("__atomr_element += __atomr_value"), "{out}");
        assert!(out.contains("t [i]"), "not a buffer: untouched: {out}");
    }

    #[test]
    fn views_and_places_in_other_uses() {
        let out = rewrite(
            "{ let m = y.rows(ld); m[(r, c)] = x[i]; y[i].re = 1.0; let p = &mut y[x[0] as usize]; }",
            &["x", "y"],
        );
        assert!(out.contains("m . __store ((r , c) , __atomr_value)"), "{out}");
        assert!(
            out.contains("y [i] . re = 1.0"),
            "a field assigned in place keeps IndexMut: {out}"
        );
        assert!(out.contains("& mut y [x . __load (0) as usize]"), "{out}");
    }
}
