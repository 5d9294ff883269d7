"""Reading auto_complete_config statically: what is literal is read in order, what is not says where."""

from __future__ import annotations

import ast
import textwrap

from model_release.repository.lint.autocomplete_read import read_completion


def _read(body: str, header: str = "    @staticmethod\n    def auto_complete_config(auto_complete_model_config):\n"):
    source = "class TritonPythonModel:\n" + header + textwrap.indent(textwrap.dedent(body), " " * 8)
    return read_completion(ast.parse(source))


def test_no_auto_complete_config_is_no_completion():
    assert read_completion(ast.parse("class TritonPythonModel:\n    def execute(self, requests):\n        pass\n")) is None


def test_literal_calls_are_read_in_order_with_names_bound_to_literals():
    done = _read("""
        '''Declare the tensors.'''
        input0 = {"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]}
        auto_complete_model_config.set_max_batch_size(8)
        auto_complete_model_config.add_input(input0)
        auto_complete_model_config.set_model_transaction_policy(dict(decoupled=True))
        return auto_complete_model_config
    """)
    assert not done.unread and not done.invalid
    assert [(c.method, c.argument) for c in done.calls] == [
        ("set_max_batch_size", 8), ("add_input", {"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]}),
        ("set_model_transaction_policy", {"decoupled": True})]


def test_a_loop_over_a_literal_list_is_unrolled():
    done = _read("""
        outputs = [{"name": "A", "data_type": "TYPE_FP32", "dims": [1]}, {"name": "B", "data_type": "TYPE_FP32", "dims": [2]}]
        for output in outputs:
            auto_complete_model_config.add_output(output)
        return auto_complete_model_config
    """)
    assert [c.argument["name"] for c in done.calls] == ["A", "B"] and not done.unread


def test_the_python_backend_docs_example_is_unread_not_guessed():
    """The docs' example adds each tensor only when as_dict() lacks it: known at load, not from the file."""
    done = _read("""
        inputs = [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]}]
        config = auto_complete_model_config.as_dict()
        input_names = [i["name"] for i in config["input"]]
        for input in inputs:
            if input["name"] not in input_names:
                auto_complete_model_config.add_input(input)
        auto_complete_model_config.set_max_batch_size(0)
        return auto_complete_model_config
    """)
    assert done.unread == "line 8: the config is used inside a for" and not done.invalid


def test_a_literal_changed_after_it_is_bound_is_no_longer_literal():
    done = _read("""
        input0 = {"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]}
        input0["optional"] = True
        auto_complete_model_config.add_input(input0)
        return auto_complete_model_config
    """)
    assert done.unread == "line 7: the argument of add_input is computed at run time"


def test_the_calls_before_what_cannot_be_read_are_kept():
    done = _read("""
        auto_complete_model_config.set_max_batch_size(4)
        if True:
            auto_complete_model_config.set_dynamic_batching()
        return auto_complete_model_config
    """)
    assert [c.method for c in done.calls] == ["set_max_batch_size"] and "inside an if" in done.unread


def test_returning_something_else_or_nothing():
    assert "returns something other than" in _read("return None\n").unread
    assert "does not return its argument" in _read("auto_complete_model_config.set_max_batch_size(0)\n").invalid
    assert _read("if True:\n    return auto_complete_model_config\n").unread == "line 4: the config is used inside an if"


def test_the_signature_triton_calls_it_with():
    cls = "    @classmethod\n    def auto_complete_config(cls, config):\n"
    assert not _read("config.set_max_batch_size(1)\nreturn config\n", cls).unread
    plain = "    def auto_complete_config(self, config):\n"
    assert "takes (self, config)" in _read("return config\n", plain).invalid
    decorated = "    @functools.cache\n    def auto_complete_config(config):\n"
    assert _read("return config\n", decorated).unread == "it is decorated (functools.cache)"
