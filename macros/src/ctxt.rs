use std::cell::RefCell;

/// Collects the errors of one derive; all are reported together.
#[derive(Default)]
pub(crate) struct Ctxt {
    errors: RefCell<Vec<darling::Error>>,
}

impl Ctxt {
    pub(crate) fn new() -> Self {
        Ctxt::default()
    }

    pub(crate) fn push(&self, error: darling::Error) {
        self.errors.borrow_mut().push(error);
    }

    pub(crate) fn error(&self, span: proc_macro2::Span, message: impl std::fmt::Display) {
        self.push(darling::Error::custom(message).with_span(&span));
    }

    pub(crate) fn check(self) -> Result<(), darling::Error> {
        let errors = self.errors.into_inner();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(darling::Error::multiple(errors))
        }
    }
}
