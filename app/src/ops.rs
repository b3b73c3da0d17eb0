//! The operator's commands of `gateway` that act on a whole gateway:
//! `check-config` and `users delete --purge` (the others are `cli`'s).

use runtime::config::Config;
use runtime::store::Accounts;

type CliResult = Result<(), Box<dyn std::error::Error>>;

/// `gateway check-config [--connect]`: one line per problem or check.
pub fn check_config(routes: crate::Routes, connect: bool) -> CliResult {
    let mut problems: Vec<String> = Vec::new();
    let mut config = match Config::from_env() {
        Ok(c) => Some(c),
        Err(e) => {
            problems.extend(e.to_string().lines().map(str::to_owned));
            None
        }
    };
    let mut catalogue = None;
    if let Some(c) = &mut config {
        let files = runtime::check::files(c, routes.table);
        problems.extend(files.problems);
        catalogue = files.catalogue;
    }
    for p in &problems {
        println!("error: {p}");
    }
    let mut failed = problems.len();
    if let (true, Some(c)) = (connect, &config) {
        let checks = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?
            .block_on(runtime::check::connect(c, catalogue.as_ref()));
        for (what, r) in checks {
            match r {
                Ok(ok) => println!("ok: {what}: {ok}"),
                Err(e) => {
                    failed += 1;
                    println!("error: {what}: {e}");
                }
            }
        }
    }
    if failed > 0 {
        return Err(format!("{failed} problem(s) found").into());
    }
    println!("the configuration is sound");
    Ok(())
}

/// `gateway users delete --user ID --purge` (the erasure tells the running
/// instances itself, through the bus).
pub async fn erase_user(routes: crate::Routes, user: i64) -> CliResult {
    let gw = crate::gateway(routes, Config::from_env()?)?;
    if gw.store.user(user)?.is_none() {
        return Err(format!("no user with id {user}").into());
    }
    let erased = runtime::erase::erase(&gw, user).await?;
    println!(
        "erased: {} keys revoked, {} objects and {} stored responses deleted",
        erased.keys_revoked, erased.objects, erased.responses
    );
    Ok(())
}
