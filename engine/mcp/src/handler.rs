//! What the client answers to a server: who it is (`initialize`), and what it does with the
//! server's notifications: a changed tool list is listed again.

use std::sync::Weak;

use rmcp::ClientHandler;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, RoleClient};

use crate::server::Inner;

/// One server's client side. It holds its server weakly: a connection must not keep a server
/// that nobody registers any more alive.
#[derive(Clone, Debug)]
pub(crate) struct Handler {
    pub server: Weak<Inner>,
}

impl ClientHandler for Handler {
    fn on_tool_list_changed(
        &self,
        context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        // The notification is handled inside the connection's loop, which must keep running
        // for the `tools/list` answer to arrive: list in a task of its own.
        if let Some(server) = self.server.upgrade() {
            let peer = context.peer;
            // Counted now, before the answer of the call that changed the list is delivered,
            // so that answer can wait for the new list (see `Inner::call`).
            let pending = server.refresh_started();
            tokio::spawn(async move {
                server.refresh(&peer).await;
                drop(pending);
            });
        }
        std::future::ready(())
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("chronicle", env!("CARGO_PKG_VERSION")),
        )
    }
}
