"""HTML -> accessibility tree: roles, names, values, ids in document order, forms."""

from esopt.web.axtree import render

PAGE = """<html><head><title>T</title><script>var x = "<a href='/no'>no</a>";</script>
<style>p { color: red }</style></head><body>
<nav><a href="/">Home</a> <a>not a link</a></nav>
<h1>Big <b>title</b></h1><p>Some   text</p>
<form action="/s" method="post"><input type="hidden" name="csrf" value="k">
<label for="q">Query</label><input id="q" name="q" value="v0">
<input name="n" placeholder="Number"><input aria-label="Hi" name="h">
<textarea name="body" aria-label="Body">old</textarea>
<select name="s" aria-label="Sort"><option value="a">Alpha</option>
<option value="b" selected>Beta</option></select>
<input type="checkbox" name="c" aria-label="Agree" checked>
<button type="submit">Send it</button></form>
<table><tr><th>Name</th></tr><tr><td><a href="/x">Cell link</a> more</td></tr></table>
<img alt="A logo"><img src="no-alt.png">
</body></html>"""


def test_tree_lines_name_every_element_once():
    page = render(PAGE)
    assert page.title == "T"
    assert page.lines() == [
        "[1] link 'Home'",
        "[2] StaticText 'not a link'",
        "[3] heading 'Big title'",
        "[4] StaticText 'Some text'",
        "[5] textbox 'Query' value: 'v0'",
        "[6] textbox 'Number' value: ''",
        "[7] textbox 'Hi' value: ''",
        "[8] textbox 'Body' value: 'old'",
        "[9] combobox 'Sort' value: 'Beta' options: Alpha | Beta",
        "[10] checkbox 'Agree' checked: true",
        "[11] button 'Send it'",
        "[12] table ''",
        "\t[13] row ''",
        "\t\t[14] columnheader 'Name'",
        "\t[15] row ''",
        "\t\t[16] cell 'Cell link more'",
        "\t\t\t[17] link 'Cell link'",
        "[18] img 'A logo'",
    ]


def test_fields_know_their_form_in_document_order():
    page = render(PAGE)
    button = page.by_id(11)
    assert button.form.action == "/s" and button.form.method == "post"
    assert [f.attrs["name"] for f in button.form.fields] == ["csrf", "q", "n", "h", "body", "s",
                                                             "c"]
    assert page.by_id(17).attrs["href"] == "/x" and page.by_id(17).form is None
    assert page.by_id(0) is None and page.by_id(19) is None


def test_same_html_same_ids_and_broken_html_does_not_raise():
    assert render(PAGE).lines() == render(PAGE).lines()
    broken = render("<div><a href='/a'>one<p>two</div><button>three")
    assert [n.role for n in broken.nodes] == ["link", "button"]
    assert broken.nodes[0].name == "one two" and broken.nodes[1].name == "three"


def test_omitted_end_tags_close_like_a_browser():
    page = render("<table><tr><td>a<td><a href='/b'>b</a><tr><td>c</table>"
                  "<select aria-label='S'><option>x<option selected>y</select>"
                  "<ul><li>one<li>two<ul><li>inner</ul></ul>")
    assert [(n.role, n.name) for n in page.nodes if n.role in ("cell", "link")] == [
        ("cell", "a"), ("cell", "b"), ("link", "b"), ("cell", "c")]
    # table, row, cell, cell, link, row (a sibling of the first, not inside it), cell
    assert [line.count("\t") for line in page.lines()[:7]] == [0, 1, 2, 2, 3, 1, 2]
    combo = next(n for n in page.nodes if n.role == "combobox")
    assert combo.options == [("x", "x"), ("y", "y")] and combo.value == "y"
    assert [n.name for n in page.nodes if n.role == "StaticText"] == ["one", "two", "inner"]
