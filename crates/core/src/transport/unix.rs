//! Unix domain sockets (`socketPath`).

use super::Transport;
use crate::error::Error;
use crate::error::Result;
#[cfg(unix)]
use crate::error::Syscall;

#[cfg(unix)]
pub(super) async fn connect(path: &str) -> Result<Transport> {
    tokio::net::UnixStream::connect(path)
        .await
        .map(Transport::Unix)
        .map_err(|e| Error::system(&e, Syscall::at("connect", path)))
}

/// tokio has no Unix sockets on Windows (where Node's `socketPath` names a pipe).
#[cfg(not(unix))]
pub(super) async fn connect(_path: &str) -> Result<Transport> {
    Err(Error::NotSupported(
        "socketPath is not supported on Windows".into(),
    ))
}
