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
}
