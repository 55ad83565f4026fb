"""The Reddit-like forum's pages: forums, posts, comments, search, submit, profiles."""

from __future__ import annotations

from flask import redirect, request

from esopt.web.apps.common import (
    EpisodeStore,
    commit,
    create_base_app,
    esc,
    form,
    like_pattern,
    link,
    one,
    page,
    page_number,
    rows,
    select,
    text_area,
    text_input,
)
from esopt.web.sites.forum import AGENT, PAGE_SIZE


def _nav() -> list[tuple[str, str]]:
    return [("/", "Forums"), ("/submit", "Submit"), ("/search", "Search"), (f"/u/{AGENT}",
                                                                            "My profile")]


def _search_box(q: str = "") -> str:
    return form("/search", text_input("q", "Search", q, "search"), "Search", method="get")


def _post_items(posts) -> str:
    items = "".join(f"<li>{link('/f/{}/{}'.format(p['forum'], p['id']), p['title'])} "
                    f"<span>{p['score']} points by {esc(p['author'])}</span></li>"
                    for p in posts)
    return f"<ul>{items}</ul>"


def create_app(store: EpisodeStore, admin_key: str):
    """The forum's Flask app."""
    app = create_base_app("forum", store, admin_key)

    def show(title: str, body: str) -> str:
        return page("Forum", title, body, _nav())

    @app.get("/")
    def index():
        forums = rows("SELECT f.name, f.description, COUNT(p.id) AS n FROM forums f "
                      "LEFT JOIN posts p ON p.forum = f.name GROUP BY f.name ORDER BY f.name")
        items = "".join(f"<li>{link('/f/' + f['name'], 'f/' + f['name'])} "
                        f"<span>{esc(f['description'])} {f['n']} posts</span></li>" for f in forums)
        return show("Forums", _search_box() + f"<ul>{items}</ul>")

    @app.get("/f/<name>")
    def forum(name):
        one("SELECT name FROM forums WHERE name = ?", name)
        sort = "new" if request.args.get("sort") == "new" else "top"
        page_no = page_number(request.args.get("page", 1, type=int))
        order = "id DESC" if sort == "new" else "score DESC"
        posts = rows(f"SELECT * FROM posts WHERE forum = ? ORDER BY {order} LIMIT ? OFFSET ?",
                     name, PAGE_SIZE + 1, (page_no - 1) * PAGE_SIZE)
        more = (link(f"/f/{name}?sort={sort}&page={page_no + 1}", "Next page")
                if len(posts) > PAGE_SIZE else "")
        sorts = (f"<p>Sort: {link(f'/f/{name}?sort=top', 'Top')} "
                 f"{link(f'/f/{name}?sort=new', 'New')}</p>")
        return show(f"f/{name}", sorts + _post_items(posts[:PAGE_SIZE]) + more)

    @app.get("/f/<name>/<int:post_id>")
    def post(name, post_id):
        p = one("SELECT * FROM posts WHERE id = ? AND forum = ?", post_id, name)
        comments = rows("SELECT * FROM comments WHERE post_id = ? ORDER BY id", post_id)
        voted = rows("SELECT 1 FROM votes WHERE user = ? AND post_id = ?", AGENT, post_id)
        items = "".join(f"<li>{link('/u/' + c['author'], c['author'])}: {esc(c['body'])}</li>"
                        for c in comments)
        body = (f"<p>{esc(p['body'])}</p><p>Submitted to {link('/f/' + name, 'f/' + name)} by "
                f"{link('/u/' + p['author'], p['author'])}</p><p>{p['score']} points</p>"
                + ("<p>You upvoted this post.</p>" if voted else
                   form(f"/f/{name}/{post_id}/vote", "", "Upvote"))
                + f"<h2>{len(comments)} comments</h2><ul>{items}</ul>"
                + form(f"/f/{name}/{post_id}/comment", text_area("body", "Comment"),
                       "Post comment"))
        return show(p["title"], body)

    @app.post("/f/<name>/<int:post_id>/vote")
    def vote(name, post_id):
        one("SELECT id FROM posts WHERE id = ? AND forum = ?", post_id, name)
        if not rows("SELECT 1 FROM votes WHERE user = ? AND post_id = ?", AGENT, post_id):
            commit("INSERT INTO votes (user, post_id) VALUES (?, ?)", AGENT, post_id)
            commit("UPDATE posts SET score = score + 1 WHERE id = ?", post_id)
        return redirect(f"/f/{name}/{post_id}", 303)

    @app.post("/f/<name>/<int:post_id>/comment")
    def comment(name, post_id):
        one("SELECT id FROM posts WHERE id = ? AND forum = ?", post_id, name)
        text = request.form.get("body", "").strip()
        if text:
            commit("INSERT INTO comments (post_id, author, body) VALUES (?, ?, ?)",
                   post_id, AGENT, text[:2000])
        return redirect(f"/f/{name}/{post_id}", 303)

    @app.route("/submit", methods=["GET", "POST"])
    def submit():
        forums = [f["name"] for f in rows("SELECT name FROM forums ORDER BY name")]
        error = ""
        if request.method == "POST":
            f = request.form
            title, body, forum_name = (f.get("title", "").strip(), f.get("body", "").strip(),
                                       f.get("forum", ""))
            if forum_name in forums and title and body:
                commit("INSERT INTO posts (forum, title, body, author, score) "
                       "VALUES (?, ?, ?, ?, 1)", forum_name, title[:300], body[:5000], AGENT)
                new = one("SELECT MAX(id) AS id FROM posts")["id"]
                return redirect(f"/f/{forum_name}/{new}", 303)
            error = "<p>Choose a forum and fill in the title and the body.</p>"
        fields = (select("forum", "Forum", [("", "Choose a forum")] + [(f, f) for f in forums])
                  + text_input("title", "Title") + text_area("body", "Body"))
        return show("Create a post", error + form("/submit", fields, "Create post"))

    @app.get("/search")
    def search():
        q = request.args.get("q", "").strip()
        found = rows("SELECT * FROM posts WHERE title LIKE ? ESCAPE '\\' "
                     "ORDER BY score DESC LIMIT 20",
                     like_pattern(q)) if q else []
        return show("Search", _search_box(q) + (f"<p>{len(found)} results</p>" if q else "")
                    + _post_items(found))

    @app.get("/u/<name>")
    def user(name):
        u = one("SELECT * FROM users WHERE name = ?", name)
        posts = rows("SELECT * FROM posts WHERE author = ? ORDER BY id", name)
        n_comments = one("SELECT COUNT(*) AS n FROM comments WHERE author = ?", name)["n"]
        return show(f"u/{name}", f"<p>{u['karma']} karma, {n_comments} comments</p>"
                    f"<h2>Posts</h2>{_post_items(posts)}")

    return app
