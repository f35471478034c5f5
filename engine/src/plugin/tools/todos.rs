//! `write_todos`: an agent's TODO list (deepagents' TodoListMiddleware). The model writes its
//! whole list on every call. When the agent drives the run (agent mode) the host turns the call
//! into the run's TODO events, so the list is the run's plan for everyone to see and edit (the
//! actor's `tools/todos.rs`); otherwise the list stays in the agent's conversation and the call
//! returns it.

use chronicle_schemas::{TodoId, TodoStatus};
use serde_json::{Value, json};

use super::{Tool, ToolContext};

/// The tool's name, which the host recognises to keep the run's TODO list.
pub const WRITE_TODOS: &str = "write_todos";
/// Characters of one item's text: a line of a plan, not a document.
pub const TODO_CONTENT_CHARS_MAX: usize = 500;
/// Items in one list; the run's own `max_todos` bounds the TODOs a list may add.
const TODO_ITEMS_MAX: usize = 100;

/// One item of a model's list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TodoItem {
    /// The id an earlier call returned for this item, when the model repeats it.
    pub id: Option<TodoId>,
    pub content: String,
    /// `pending`, `in_progress` or `completed`.
    pub status: TodoStatus,
}

impl TodoItem {
    /// The items of a call's arguments (`{"todos": [{content, status, id?}]}`), or what is wrong
    /// with them, naming the item.
    pub fn parse_list(args: &Value) -> Result<Vec<TodoItem>, String> {
        let items = args
            .get("todos")
            .and_then(Value::as_array)
            .ok_or("write_todos needs `todos`, an array of {content, status}")?;
        if items.len() > TODO_ITEMS_MAX {
            return Err(format!(
                "write_todos: {} items, over the {TODO_ITEMS_MAX}-item limit",
                items.len()
            ));
        }
        items
            .iter()
            .enumerate()
            .map(|(i, item)| Self::parse(i, item))
            .collect()
    }

    fn parse(i: usize, item: &Value) -> Result<TodoItem, String> {
        let content = item
            .get("content")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .ok_or_else(|| format!("write_todos: item #{i} needs `content`, a non-empty string"))?;
        if content.chars().count() > TODO_CONTENT_CHARS_MAX {
            return Err(format!(
                "write_todos: item #{i}'s content is over {TODO_CONTENT_CHARS_MAX} characters"
            ));
        }
        let status = match item.get("status").and_then(Value::as_str) {
            None => TodoStatus::Pending,
            Some(s) => match TodoStatus::parse(s) {
                Some(
                    st @ (TodoStatus::Pending | TodoStatus::InProgress | TodoStatus::Completed),
                ) => st,
                _ => {
                    return Err(format!(
                        "write_todos: item #{i}'s status {s:?} is not pending, in_progress or completed"
                    ));
                }
            },
        };
        let id = match item.get("id") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(TodoId(s.clone())),
            Some(other) => {
                return Err(format!(
                    "write_todos: item #{i}'s id must be a string, got {other}"
                ));
            }
        };
        Ok(TodoItem {
            id,
            content: content.to_owned(),
            status,
        })
    }
}

/// `write_todos {todos: [{content, status, id?}]}`.
#[derive(Clone, Copy, Debug, Default)]
pub struct WriteTodos;

#[async_trait::async_trait]
impl Tool for WriteTodos {
    fn name(&self) -> &str {
        WRITE_TODOS
    }

    fn description(&self) -> &str {
        "Write your TODO list for this task: the whole list every time, each item {content, status} with status pending, in_progress or completed (keep the item you work on in_progress, mark it completed when done). Repeat an item's `id` from the previous answer to update it; items you leave out are dropped."
    }

    fn parameters(&self) -> Value {
        json!({"type": "object", "required": ["todos"], "properties": {
            "todos": {"type": "array", "items": {
                "type": "object", "required": ["content", "status"],
                "properties": {
                    "content": {"type": "string"},
                    "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                    "id": {"type": "string", "description": "the id the previous answer gave this item"},
                },
            }},
        }})
    }

    /// Outside agent mode the list is the agent's own: it is kept in the conversation, and the
    /// call answers with it as written.
    async fn call(&self, _ctx: &ToolContext, args: Value) -> Result<Value, String> {
        let items = TodoItem::parse_list(&args)?;
        let todos: Vec<Value> = items
            .iter()
            .map(|t| json!({"content": t.content, "status": t.status}))
            .collect();
        Ok(json!({ "todos": todos }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_checked_item_by_item() {
        let ok = TodoItem::parse_list(&json!({"todos": [
            {"content": " read the data ", "status": "in_progress"},
            {"content": "write the report", "status": "pending", "id": "todo_003"},
            {"content": "no status"},
        ]}))
        .unwrap();
        assert_eq!(ok[0].content, "read the data");
        assert_eq!(ok[0].status, TodoStatus::InProgress);
        assert_eq!(ok[1].id, Some(TodoId::from("todo_003")));
        assert_eq!(ok[2].status, TodoStatus::Pending);
        let err = |v: Value| TodoItem::parse_list(&v).unwrap_err();
        assert_eq!(
            err(json!({})),
            "write_todos needs `todos`, an array of {content, status}"
        );
        assert_eq!(
            err(json!({"todos": [{"content": "a", "status": "done"}]})),
            "write_todos: item #0's status \"done\" is not pending, in_progress or completed"
        );
        assert_eq!(
            err(json!({"todos": [{"content": "a"}, {"content": ""}]})),
            "write_todos: item #1 needs `content`, a non-empty string"
        );
        assert_eq!(
            err(json!({"todos": [{"content": "a", "id": 3}]})),
            "write_todos: item #0's id must be a string, got 3"
        );
    }
}
