mod summary;
mod support;
