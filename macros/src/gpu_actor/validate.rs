//! Checks across handlers: unique variant names, at most one hook of each kind.

use std::collections::HashMap;

use super::parse::ActorDef;
use crate::errors::Errors;

/// Records every cross-handler problem.
pub(crate) fn validate(def: &ActorDef, errors: &mut Errors) {
    let mut seen: HashMap<String, String> = HashMap::new();
    for h in &def.handlers {
        let dtypes: Vec<Option<&syn::Type>> = if h.generic.is_some() {
            h.dtypes.iter().map(Some).collect()
        } else {
            vec![None]
        };
        for d in dtypes {
            let v = h.variant(d);
            match seen.get(&v.to_string()) {
                Some(first) => errors.push(syn::Error::new(
                    v.span(),
                    format!(
                        "handler `{}` produces the message variant `{v}`, which `{first}` already produces; rename one of the methods",
                        h.method
                    ),
                )),
                None => {
                    seen.insert(v.to_string(), h.method.to_string());
                }
            }
        }
    }
    if def.marked_handlers == 0 {
        errors.push(syn::Error::new(
            def.name.span(),
            "an actor needs at least one #[handler] method to receive messages: mark one with #[handler]",
        ));
    }
    for (hooks, name) in [
        (&def.pre_start, "pre_start"),
        (&def.post_stop, "post_stop"),
        (&def.pre_restart, "pre_restart"),
    ] {
        for extra in hooks.iter().skip(1) {
            errors.push(syn::Error::new(
                extra.span,
                format!("#[{name}] marks one method; `{}` is a second", extra.method),
            ));
        }
    }
    for (tag, span) in def.options.restart_on.iter().filter_map(|r| {
        def.options
            .resume_on
            .iter()
            .find(|s| *s == r)
            .map(|s| (s.to_string(), s.span()))
    }) {
        errors.push(syn::Error::new(
            span,
            format!("`{tag}` is in both `restart_on` and `resume_on`; keep it in one"),
        ));
    }
    validate_device(def, errors);
}

/// `device`: only the runtime's own actors extend `Device`; every device handler answers,
/// and a generic one runs over a named dtype set that `device(...)` gives a bound for.
fn validate_device(def: &ActorDef, errors: &mut Errors) {
    if let Some(opt) = &def.options.device {
        if !def.options.krate.as_ref().is_some_and(|k| k.is_ident("crate")) {
            errors.push(syn::Error::new(
                opt.span,
                "`device` adds this actor's handlers to the runtime's `Device`, which only the runtime's own library \
                 actors (`crate = crate`) can do; call your actor through its generated `<Name>Ref` client instead",
            ));
        }
    }
    for h in &def.handlers {
        let Some((_, at)) = &h.device else { continue };
        let Some(_) = &def.options.device else {
            errors.push(syn::Error::new(
                *at,
                format!(
                    "`{}` is marked `device` but the actor has no `device(...)` option: add `device(...)` to #[gpu_actor]",
                    h.method
                ),
            ));
            continue;
        };
        for (key, list) in [("borrow", &h.borrow), ("into", &h.into)] {
            for b in list.iter().filter(|b| !h.args.iter().any(|(n, _)| n == *b)) {
                errors.push(syn::Error::new(
                    b.span(),
                    format!(
                        "`{b}` is not a parameter of `{}`: `{key}(...)` names parameters",
                        h.method
                    ),
                ));
            }
        }
        for b in h.borrow.iter().filter(|b| h.into.contains(b)) {
            errors.push(syn::Error::new(
                b.span(),
                format!("`{b}` is both borrowed and converted: keep it in one of `borrow(...)` and `into(...)`"),
            ));
        }
        if h.tell {
            errors.push(syn::Error::new(
                *at,
                "a `device` handler answers its caller (a `Device` method awaits the reply): drop `tell`",
            ));
        }
        if h.generic.is_some() && h.dtype_sets.len() != 1 {
            errors.push(syn::Error::new(
                *at,
                format!(
                    "the `Device` method of `{}` is bounded by its dtype set's public bound: write its dtypes as one \
                     named set, e.g. `dtypes(blas1)`",
                    h.method
                ),
            ));
        }
    }
}
