//! Claims offline: creds files, the decoder's properties, JWTs signed by the Go library and the
//! JavaScript one (golden), malformed input refused.

mod creds;
mod decoder_props;
mod go_signed;
mod golden;
mod malformed;
