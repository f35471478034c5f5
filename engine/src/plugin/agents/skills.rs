//! Skills: reusable instructions an LLM agent can follow, each a `SKILL.md` with YAML front
//! matter (`name`, `description`) in a directory of its own:
//! `<skills dir>/<skill>/SKILL.md`. Skills come from two places: the server-wide skills
//! directory (`--skills-dir`) and the session's `/workspace/skills/`. The session's copy of a
//! skill overrides the server's.
//!
//! Progressive disclosure: only each skill's name, description and path go into the system
//! prompt ([`prompt`]); the model reads a body with `read_file` when it needs it. So that it can,
//! a server-wide skill the session lacks is copied into `/workspace/skills/` when loaded (the
//! copy is the session's from then on, and a human or the agent may edit it there). Skills are
//! text: nothing in a skill directory is ever run.

use std::path::{Path, PathBuf};

use cap_std::fs::Dir;
use chronicle_schemas::Hash;
use serde::Deserialize;

use crate::plugin::tools::{Workspace, WorkspaceError};

/// Where a session's skills live, inside its workspace.
pub const SKILLS_DIR: &str = "skills";
/// The file that makes a directory a skill.
pub const SKILL_FILE: &str = "SKILL.md";
/// Skills listed at most (the rest are reported as problems).
pub const SKILLS_MAX: usize = 64;
/// A `SKILL.md` larger than this is not loaded.
pub const SKILL_FILE_BYTES_MAX: u64 = 256 * 1024;
/// A skill's name: 1..=64 of `a-z`, `0-9` and `-`.
pub const SKILL_NAME_CHARS_MAX: usize = 64;
/// A skill's description: 1..=1024 characters.
pub const SKILL_DESCRIPTION_CHARS_MAX: usize = 1024;

/// One skill as the model is told of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// Where the model reads it: `/workspace/skills/<dir>/SKILL.md`.
    pub path: String,
    /// The `SKILL.md` it was read from, so that a replay knows which text the model could read.
    pub hash: Hash,
}

/// What loading found: the skills, by name, and why any other `SKILL.md` was left out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Skills {
    pub skills: Vec<Skill>,
    pub problems: Vec<String>,
}

#[derive(Deserialize)]
struct FrontMatter {
    name: String,
    description: String,
}

/// Loads the session's skills: those in `/workspace/skills/`, and those of `server_dir` the
/// session has no skill directory of the same name for (copied into the workspace first).
pub fn load(server_dir: Option<&Path>, workspace: &Workspace) -> Result<Skills, WorkspaceError> {
    let mut found = Skills::default();
    if let Some(server_dir) = server_dir {
        copy_missing(server_dir, workspace, &mut found.problems)?;
    }
    let Some(dir) = workspace.existing_dir()? else {
        return Ok(found);
    };
    let Ok(skills_dir) = dir.open_dir(SKILLS_DIR) else {
        return Ok(found);
    };
    let mut names = entries(&skills_dir);
    names.sort();
    for dir_name in names {
        let rel = Path::new(SKILLS_DIR).join(&dir_name).join(SKILL_FILE);
        let shown = Workspace::display(&rel);
        let text = match read_bounded(&skills_dir, &Path::new(&dir_name).join(SKILL_FILE)) {
            Ok(Some(text)) => text,
            Ok(None) => continue,
            Err(why) => {
                found.problems.push(format!("{shown}: {why}"));
                continue;
            }
        };
        match parse(&text) {
            Ok(fm) if found.skills.iter().any(|s| s.name == fm.name) => {
                found.problems.push(format!(
                    "{shown}: a skill named {} is listed already",
                    fm.name
                ));
            }
            Ok(_) if found.skills.len() == SKILLS_MAX => {
                found
                    .problems
                    .push(format!("{shown}: over the limit of {SKILLS_MAX} skills"));
            }
            Ok(fm) => found.skills.push(Skill {
                name: fm.name,
                description: fm.description,
                path: shown,
                hash: Hash::of_content(text.as_bytes()),
            }),
            Err(why) => found.problems.push(format!("{shown}: {why}")),
        }
    }
    Ok(found)
}

/// The system prompt's part about skills: names, descriptions and paths, never the bodies.
/// Empty without skills.
pub fn prompt(skills: &[Skill]) -> String {
    if skills.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "## Skills\n\nThese skills hold instructions for recurring kinds of work. When a task \
         matches one, read its SKILL.md with read_file first and follow it.\n\n",
    );
    for s in skills {
        out.push_str(&format!("- {}: {} ({})\n", s.name, s.description, s.path));
    }
    out
}

/// A `SKILL.md`'s front matter, checked.
fn parse(text: &str) -> Result<FrontMatter, String> {
    let matter = gray_matter::Matter::<gray_matter::engine::YAML>::new();
    let parsed = matter
        .parse::<FrontMatter>(text)
        .map_err(|e| format!("front matter is not YAML with a name and a description: {e}"))?;
    let fm = parsed
        .data
        .ok_or("no front matter (a `---` block with name and description)")?;
    let name_ok = !fm.name.is_empty()
        && fm.name.chars().count() <= SKILL_NAME_CHARS_MAX
        && fm
            .name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !name_ok {
        return Err(format!(
            "name {:?} must be 1..={SKILL_NAME_CHARS_MAX} of a-z, 0-9 and -",
            fm.name
        ));
    }
    let chars = fm.description.trim().chars().count();
    if chars == 0 || chars > SKILL_DESCRIPTION_CHARS_MAX {
        return Err(format!(
            "description must be 1..={SKILL_DESCRIPTION_CHARS_MAX} characters, got {chars}"
        ));
    }
    Ok(FrontMatter {
        name: fm.name,
        description: fm.description.trim().to_owned(),
    })
}

/// The names of `dir`'s subdirectories that are plain UTF-8 names.
fn entries(dir: &Dir) -> Vec<String> {
    let Ok(read) = dir.entries() else {
        return Vec::new();
    };
    read.filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .collect()
}

/// `rel` under `dir` as text: `None` when it does not exist; an error when it is too large or
/// not UTF-8.
fn read_bounded(dir: &Dir, rel: &Path) -> Result<Option<String>, String> {
    let meta = match dir.metadata(rel) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    if !meta.is_file() {
        return Ok(None);
    }
    if meta.len() > SKILL_FILE_BYTES_MAX {
        return Err(format!(
            "{} bytes, over the limit of {SKILL_FILE_BYTES_MAX}",
            meta.len()
        ));
    }
    dir.read_to_string(rel).map(Some).map_err(|e| e.to_string())
}

/// Copies each skill directory of `server_dir` the session lacks into `/workspace/skills/` (its
/// `SKILL.md` and the plain files beside it, not subdirectories).
fn copy_missing(
    server_dir: &Path,
    workspace: &Workspace,
    problems: &mut Vec<String>,
) -> Result<(), WorkspaceError> {
    let Ok(server) = Dir::open_ambient_dir(server_dir, cap_std::ambient_authority()) else {
        problems.push(format!(
            "the skills directory {} cannot be opened",
            server_dir.display()
        ));
        return Ok(());
    };
    let mut missing: Vec<String> = Vec::new();
    let dir = workspace.existing_dir()?;
    for name in entries(&server) {
        let theirs = Path::new(SKILLS_DIR).join(&name);
        let present = dir.as_ref().is_some_and(|d| d.exists(&theirs));
        if !present && server.exists(Path::new(&name).join(SKILL_FILE)) {
            missing.push(name);
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let dir = workspace.dir()?;
    for name in missing {
        let rel: PathBuf = Path::new(SKILLS_DIR).join(&name);
        let copied = copy_files(&server, Path::new(&name), &dir, &rel);
        if let Err(e) = copied {
            problems.push(format!(
                "{}: cannot copy the server's skill: {e}",
                Workspace::display(&rel)
            ));
        }
    }
    Ok(())
}

fn copy_files(from: &Dir, from_rel: &Path, to: &Dir, to_rel: &Path) -> std::io::Result<()> {
    to.create_dir_all(to_rel)?;
    for entry in from.read_dir(from_rel)? {
        let entry = entry?;
        if !entry.file_type()?.is_file() {
            continue;
        }
        let name = entry.file_name();
        let source = from_rel.join(&name);
        if from.metadata(&source)?.len() > SKILL_FILE_BYTES_MAX {
            continue;
        }
        to.write(to_rel.join(&name), from.read(&source)?)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill(root: &Path, dir: &str, text: &str) {
        std::fs::create_dir_all(root.join(dir)).unwrap();
        std::fs::write(root.join(dir).join(SKILL_FILE), text).unwrap();
    }

    const CSV: &str =
        "---\nname: csv-report\ndescription: Summarise a CSV file\n---\n# Steps\nRead the file.\n";

    #[test]
    fn the_session_copy_overrides_and_server_skills_are_copied_in() {
        let server = tempfile::tempdir().unwrap();
        let ws_root = tempfile::tempdir().unwrap();
        let ws = Workspace::at(ws_root.path());
        skill(server.path(), "csv-report", CSV);
        skill(
            server.path(),
            "time-series",
            "---\nname: time-series\ndescription: Trends over time\n---\nbody\n",
        );
        std::fs::write(server.path().join("time-series/template.sql"), "select 1").unwrap();
        skill(
            &ws_root.path().join(SKILLS_DIR),
            "csv-report",
            "---\nname: csv-report\ndescription: The session's own version\n---\nmine\n",
        );

        let found = load(Some(server.path()), &ws).unwrap();
        assert_eq!(found.problems, Vec::<String>::new());
        let listed: Vec<(&str, &str, &str)> = found
            .skills
            .iter()
            .map(|s| (s.name.as_str(), s.description.as_str(), s.path.as_str()))
            .collect();
        assert_eq!(
            listed,
            [
                (
                    "csv-report",
                    "The session's own version",
                    "/workspace/skills/csv-report/SKILL.md"
                ),
                (
                    "time-series",
                    "Trends over time",
                    "/workspace/skills/time-series/SKILL.md"
                ),
            ]
        );
        // The server's skill is now the session's, with the files beside it.
        assert_eq!(
            std::fs::read_to_string(ws_root.path().join("skills/time-series/template.sql"))
                .unwrap(),
            "select 1"
        );
        assert!(
            std::fs::read_to_string(ws_root.path().join("skills/csv-report/SKILL.md"))
                .unwrap()
                .contains("mine")
        );

        let text = prompt(&found.skills);
        assert!(
            text.contains("csv-report: The session's own version"),
            "{text}"
        );
        assert!(!text.contains("mine") && !text.contains("body"), "{text}");
    }

    #[test]
    fn bad_skills_are_reported_and_left_out() {
        let ws_root = tempfile::tempdir().unwrap();
        let skills = ws_root.path().join(SKILLS_DIR);
        skill(&skills, "a-good", CSV);
        skill(&skills, "b-no-front-matter", "# just text\n");
        skill(
            &skills,
            "c-bad-name",
            "---\nname: Bad Name\ndescription: x\n---\n",
        );
        skill(&skills, "d-twice", CSV);
        skill(&skills, "e-no-description", "---\nname: e\n---\n");
        std::fs::create_dir_all(skills.join("f-no-skill-file")).unwrap();

        let found = load(None, &Workspace::at(ws_root.path())).unwrap();
        assert_eq!(found.skills.len(), 1);
        assert_eq!(found.skills[0].name, "csv-report");
        assert_eq!(found.problems.len(), 4, "{:?}", found.problems);
        for (problem, what) in found.problems.iter().zip([
            "b-no-front-matter",
            "c-bad-name",
            "d-twice",
            "e-no-description",
        ]) {
            assert!(problem.contains(what), "{problem}");
        }
    }

    #[test]
    fn no_skills_no_prompt() {
        let ws_root = tempfile::tempdir().unwrap();
        let found = load(None, &Workspace::at(ws_root.path().join("absent"))).unwrap();
        assert_eq!(found, Skills::default());
        assert_eq!(prompt(&found.skills), "");
    }
}
